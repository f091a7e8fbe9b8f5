#!/usr/bin/python3
"""CLINC150 side by side: agentplane's example router and peer classifiers,
the same splits, the same threshold rule, one machine, one run.

Every system gets a confidence per utterance (its top in-scope class and how
sure it is). The threshold is picked on the validation splits only (val +
oos_val): the highest in-scope accuracy whose out-of-scope recall reaches
55 %. Reported on the test splits (test + oos_test): in-scope accuracy (the
right intent, above the threshold), out-of-scope recall (below it), and
AUROC of the confidence, in-scope against out-of-scope. "+ oos-train" rows
train with the out-of-scope training utterances as one more class (the
published oos-train setting); an utterance whose best class is that one
gets confidence 0.

Peers: scikit-learn TF-IDF (words 1-2, character 3-4-grams within words)
with logistic regression and with a linear SVM (confidence: the margin of
the best class), and fastText (word bigrams, character 3-5-grams, 100 epochs). Their
settings were chosen on validation accuracy. agentplane
is run as `go run ./bench/clinc150` from the repository root.

Needs Debian's python3-sklearn and fasttext:
    apt-get install python3-sklearn fasttext
    make peers          # or: /usr/bin/python3 bench/peers/clinc150/peers.py
"""

import os

# one core, as agentplane's benchmark runs
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
from scipy.sparse import hstack
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.svm import LinearSVC

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
OOS = "oos"
RECALL = 0.55


def load(path):
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    return {k: [(t, i) for t, i in d[k]] for k in ("train", "val", "test", "oos_train", "oos_val", "oos_test")}


def tune(conf_val, ok_val, conf_oos):
    """The threshold with the highest in-scope accuracy on val whose
    out-of-scope recall on oos_val reaches RECALL."""
    cands = np.unique(np.concatenate([conf_val, conf_oos]))
    best, best_acc = None, -1.0
    for th in cands:
        acc = np.mean(ok_val & (conf_val >= th))
        rec = np.mean(conf_oos < th)
        if rec >= RECALL and acc > best_acc:
            best, best_acc = th, acc
    return best


def score(name, pred, conf, d, train_s, lat_us):
    """pred/conf: dicts split -> arrays of predicted intents and confidences."""
    gold_val = np.array([i for _, i in d["val"]])
    gold_test = np.array([i for _, i in d["test"]])
    th = tune(conf["val"], pred["val"] == gold_val, conf["oos_val"])
    acc = np.mean((pred["test"] == gold_test) & (conf["test"] >= th))
    rec = np.mean(conf["oos_test"] < th)
    y = np.concatenate([np.ones(len(conf["test"])), np.zeros(len(conf["oos_test"]))])
    auroc = roc_auc_score(y, np.concatenate([conf["test"], conf["oos_test"]]))
    return dict(name=name, acc=100 * acc, rec=100 * rec, auroc=auroc, train_s=train_s, lat_us=lat_us)


def splits(d):
    return ("val", "oos_val", "test", "oos_test")


def train_set(d, oos_train):
    rows = list(d["train"])
    if oos_train:
        rows += [(t, OOS) for t, _ in d["oos_train"]]
    return [t for t, _ in rows], [i for _, i in rows]


class Tfidf:
    def __init__(self):
        self.words = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
        self.chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 4), sublinear_tf=True)

    def fit(self, texts):
        return hstack([self.words.fit_transform(texts), self.chars.fit_transform(texts)]).tocsr()

    def transform(self, texts):
        return hstack([self.words.transform(texts), self.chars.transform(texts)]).tocsr()


def sklearn_system(name, make, d, oos_train, margin):
    texts, labels = train_set(d, oos_train)
    start = time.perf_counter()
    vec = Tfidf()
    X = vec.fit(texts)
    clf = make().fit(X, labels)
    train_s = time.perf_counter() - start
    classes = np.array(clf.classes_)
    inscope = classes != OOS
    pred, conf = {}, {}
    for s in splits(d):
        Xs = vec.transform([t for t, _ in d[s]])
        scores = clf.decision_function(Xs) if margin else clf.predict_proba(Xs)
        best = np.argmax(scores, axis=1)
        masked = np.where(inscope, scores, -np.inf)
        top = np.argmax(masked, axis=1)
        c = masked[np.arange(len(top)), top]
        if oos_train:
            c = np.where(classes[best] == OOS, -1e9, c)  # below any threshold
        pred[s], conf[s] = classes[top], c
    # one utterance at a time, as a router sees them, with the weights laid
    # out for it (scikit-learn's own predict copies the weight matrix)
    W, b = np.ascontiguousarray(clf.coef_.T), clf.intercept_
    took = []
    for t, _ in d["test"][:500]:
        start = time.perf_counter()
        x = vec.transform([t])
        z = x @ W + b
        if not margin:
            z = np.exp(z - z.max())
            z /= z.sum()
        took.append(time.perf_counter() - start)
        if len(took) <= 50:  # the same decision as scikit-learn's
            assert classes[np.argmax(z)] == clf.predict(x)[0]
    lat_us = float(np.median(took)) * 1e6
    return score(name, pred, conf, d, train_s, lat_us)


def fasttext_system(name, d, oos_train, workdir):
    texts, labels = train_set(d, oos_train)
    clean = lambda t: re.sub(r"\s+", " ", t.strip().lower())
    train = os.path.join(workdir, "train.txt")
    with open(train, "w", encoding="utf-8") as f:
        for t, i in zip(texts, labels):
            f.write(f"__label__{i} {clean(t)}\n")
    model = os.path.join(workdir, "model")
    start = time.perf_counter()
    subprocess.run(["fasttext", "supervised", "-input", train, "-output", model, "-epoch", "100", "-lr", "0.5",
                    "-wordNgrams", "2", "-minn", "3", "-maxn", "5", "-dim", "100", "-thread", "1", "-seed", "1"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    train_s = time.perf_counter() - start
    pred, conf = {}, {}
    for s in splits(d):
        path = os.path.join(workdir, s + ".txt")
        with open(path, "w", encoding="utf-8") as f:
            for t, _ in d[s]:
                f.write(clean(t) + "\n")
        out = subprocess.run(["fasttext", "predict-prob", model + ".bin", path, "-1"], check=True,
                             capture_output=True, text=True).stdout.splitlines()
        p, c = [], []
        for line in out:
            parts = line.split()
            probs = [(parts[k][len("__label__"):], float(parts[k + 1])) for k in range(0, len(parts), 2)]
            inscope = [(l, q) for l, q in probs if l != OOS]
            l, q = inscope[0] if inscope else ("", 0.0)
            if oos_train and probs and probs[0][0] == OOS:
                q = -1.0
            p.append(l)
            c.append(q)
        pred[s], conf[s] = np.array(p), np.array(c)
    return score(name, pred, conf, d, train_s, float("nan"))


def agentplane(name, negatives):
    args = ["go", "run", "./bench/clinc150"] + (["-negatives"] if negatives else [])
    out = subprocess.run(args, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    last = dict(kv.split("=") for kv in out.strip().splitlines()[-1].split())
    train = re.search(r"loaded and trained in ([0-9.]+)(ms|s)", out)
    train_s = float(train.group(1)) / (1000 if train.group(2) == "ms" else 1)
    return dict(name=name, acc=100 * float(last["in_scope_accuracy"]), rec=100 * float(last["oos_recall"]),
                auroc=float(last["auroc"]), train_s=train_s, lat_us=float(last["p50_us"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(ROOT, "internal", "clinc150", "testdata", "data_full.json"))
    args = ap.parse_args()
    d = load(args.data)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for oos_train in (False, True):
            suffix = " + oos-train" if oos_train else ""
            rows.append(agentplane("agentplane" + suffix, oos_train))
            rows.append(sklearn_system("TF-IDF + logistic regression" + suffix,
                                       lambda: LogisticRegression(C=100, max_iter=1000), d, oos_train, margin=False))
            rows.append(sklearn_system("TF-IDF + linear SVM" + suffix, lambda: LinearSVC(C=1), d, oos_train, margin=True))
            rows.append(fasttext_system("fastText" + suffix, d, oos_train, work))
            for r in rows[-4:]:
                print(f"  {r['name']}: {r['acc']:.2f} / {r['rec']:.1f} / {r['auroc']:.4f}", file=sys.stderr)
    print("| system | in-scope accuracy | out-of-scope recall | AUROC | training (s) | p50 per utterance (µs) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        lat = "–" if r["lat_us"] != r["lat_us"] else f"{r['lat_us']:.0f}"
        print(f"| {r['name']} | {r['acc']:.2f} | {r['rec']:.1f} | {r['auroc']:.3f} | {r['train_s']:.1f} | {lat} |")


if __name__ == "__main__":
    main()
