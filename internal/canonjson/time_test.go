package canonjson

import (
	"testing"
	"time"
)

// TestAppendTime holds AppendTime to time.RFC3339Nano on the times whose
// digits differ in every place: the year's edges, each month's first and
// last day, leap days, every digit of the fraction with and without
// trailing zeros, and other zones (which take the standard path).
func TestAppendTime(t *testing.T) {
	zones := []*time.Location{time.UTC, time.FixedZone("", 5*3600+30*60), time.FixedZone("", -8*3600), time.Local}
	var times []time.Time
	for _, y := range []int{0, 1, 9, 10, 99, 100, 999, 1000, 1969, 1970, 2000, 2024, 2026, 2100, 9999} {
		for m := time.January; m <= time.December; m++ {
			times = append(times, time.Date(y, m, 1, 0, 0, 0, 0, time.UTC), time.Date(y, m+1, 0, 23, 59, 59, 999999999, time.UTC))
		}
	}
	for _, ns := range []int{0, 1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 123456789, 120000000, 100000001, 999999999, 500} {
		times = append(times, time.Date(2026, 11, 28, 9, 5, 7, ns, time.UTC))
	}
	times = append(times, time.Unix(0, 0).UTC(), time.Now().UTC(), time.Now(), time.Time{}, time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, tm := range times {
		for _, z := range zones {
			in := tm.In(z)
			if tm.Location() != time.UTC {
				in = tm
			}
			want := in.Format(time.RFC3339Nano)
			if got := string(AppendTime([]byte("x"), in)); got != "x"+want {
				t.Errorf("AppendTime(%v) = %q, want %q", in, got[1:], want)
			}
		}
	}
}

func FuzzAppendTime(f *testing.F) {
	f.Add(int64(0), int64(0))
	f.Add(int64(1795000000), int64(123456789))
	f.Add(int64(-62135596800), int64(1))
	f.Add(int64(253402300799), int64(999999999))
	f.Fuzz(func(t *testing.T, sec, ns int64) {
		tm := time.Unix(sec, ns).UTC()
		if y := tm.Year(); y < 0 || y > 9999 {
			return
		}
		if got, want := string(AppendTime(nil, tm)), tm.Format(time.RFC3339Nano); got != want {
			t.Fatalf("AppendTime(%d, %d) = %q, want %q", sec, ns, got, want)
		}
	})
}

func BenchmarkAppendTime(b *testing.B) {
	tm := time.Date(2026, 11, 28, 9, 5, 7, 123456789, time.UTC)
	buf := make([]byte, 0, 64)
	b.Run("AppendTime", func(b *testing.B) {
		for range b.N {
			buf = AppendTime(buf[:0], tm)
		}
	})
	b.Run("AppendFormat", func(b *testing.B) {
		for range b.N {
			buf = tm.AppendFormat(buf[:0], time.RFC3339Nano)
		}
	})
}

// TestAppendTimeAcrossTheRange walks years 0 to 9999 by a prime number of
// days (every month and weekday lands), and every second of the days at
// the range's ends, 1969's last and 2000's leap day, and the range's
// edges from both sides; each against time.Format.
func TestAppendTimeAcrossTheRange(t *testing.T) {
	check := func(tm time.Time) {
		t.Helper()
		if got, want := string(AppendTime(nil, tm)), tm.Format(time.RFC3339Nano); got != want {
			t.Fatalf("AppendTime(%d, %d) = %q, want %q", tm.Unix(), tm.Nanosecond(), got, want)
		}
	}
	for u := int64(minUnix); u <= maxUnix; u += 97 * 86400 {
		check(time.Unix(u, 0).UTC())
		check(time.Unix(u+86399, 999999999).UTC())
		check(time.Unix(u+43210, 500).UTC())
	}
	for _, day := range []int64{minUnix, -86400, 0, 951782400, maxUnix - 86399} {
		for s := range int64(86400) {
			check(time.Unix(day+s, 0).UTC())
		}
	}
	for _, u := range []int64{minUnix - 1, minUnix, maxUnix, maxUnix + 1, -1, 1 << 40, -(1 << 40), -1 << 62, 1 << 62, 1<<63 - 1, -1 << 63} {
		for _, ns := range []int64{0, 1, 999999999, -1} {
			check(time.Unix(u, ns).UTC())
		}
	}
}
