// LangGraph JS on the DAG shapes of agentplane's BenchmarkWorkflow
// (workflow/bench_test.go): layers of no-op nodes, each node depending
// on every node of the layer before; a whole run per iteration, one
// after another, each on its own thread. Without a checkpointer, with
// MemorySaver, and with SqliteSaver on a file (its defaults).
//
// Then 32 runs of the 3×1 chain at a time with SqliteSaver, each on its
// own thread, as agentplane's BenchmarkConcurrentWorkflows runs them:
// runs/s.
//
//   node bench.mjs [-n 300]
import { StateGraph, Annotation, START, END, MemorySaver } from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const n = Number(process.argv[process.argv.indexOf("-n") + 1] || 300);
const State = Annotation.Root({ done: Annotation({ reducer: (a, b) => a + b, default: () => 0 }) });

function graph(layers, width, checkpointer) {
  const g = new StateGraph(State);
  let prev = [START];
  for (let l = 0; l < layers; l++) {
    const cur = [];
    for (let i = 0; i < width; i++) {
      const id = `t${l}_${i}`;
      g.addNode(id, async () => ({ done: 1 }));
      cur.push(id);
    }
    for (const id of cur) g.addEdge(prev.length === 1 ? prev[0] : prev, id);
    prev = cur;
  }
  for (const id of prev) g.addEdge(id, END);
  return g.compile(checkpointer ? { checkpointer } : {});
}

const dir = mkdtempSync(join(tmpdir(), "langgraph-"));
for (const [layers, width] of [[3, 1], [1, 10], [5, 4]]) {
  for (const kind of ["none", "memory", "sqlite"]) {
    const saver = kind === "memory" ? new MemorySaver() : kind === "sqlite" ? SqliteSaver.fromConnString(join(dir, `${layers}x${width}.db`)) : null;
    const app = graph(layers, width, saver);
    const tasks = layers * width;
    for (let i = 0; i < 20; i++) await app.invoke({}, { configurable: { thread_id: `warm${i}` } }); // warm-up
    const lat = [];
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) {
      const s = process.hrtime.bigint();
      const out = await app.invoke({}, { configurable: { thread_id: `run${i}` } });
      lat.push(Number(process.hrtime.bigint() - s) / 1e3);
      if (out.done !== tasks) throw new Error(`ran ${out.done} of ${tasks} nodes`);
    }
    const total = Number(process.hrtime.bigint() - t0) / 1e3;
    lat.sort((a, b) => a - b);
    console.log(`langgraph/${kind}/${layers}x${width}\t${(total / n).toFixed(0)} µs/run\t${(total / n / tasks).toFixed(1)} µs/task\tp50 ${lat[Math.floor(n / 2)].toFixed(0)} µs\tp99 ${lat[Math.floor(n * 0.99)].toFixed(0)} µs`);
  }
}
{
  const app = graph(3, 1, SqliteSaver.fromConnString(join(dir, "concurrent.db")));
  const runs = Math.max(n, 320);
  let next = 0;
  const worker = async () => {
    while (next < runs) {
      const i = next++;
      const out = await app.invoke({}, { configurable: { thread_id: `c${i}` } });
      if (out.done !== 3) throw new Error(`ran ${out.done} of 3 nodes`);
    }
  };
  const t0 = process.hrtime.bigint();
  await Promise.all(Array.from({ length: 32 }, worker));
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  console.log(`langgraph/sqlite/3x1 x32 concurrent\t${runs} runs\t${(runs / secs).toFixed(0)} runs/s`);
}
rmSync(dir, { recursive: true, force: true });
