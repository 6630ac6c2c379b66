"""Summary of ncu source pages (SASS, CSV, from `ncu -i X --page source --csv --print-source
sass`): per file, warp-stall samples by reason and by opcode, instructions executed by
opcode, then the instructions with at least THRESHOLD samples.
Usage: python3 ncu_source_summary.py [--threshold N] FILE.csv ..."""
import argparse
import collections
import csv


def load(path):
  rows = list(csv.reader(open(path)))
  hdr, data = rows[1], rows[2:]
  return {h: i for i, h in enumerate(hdr)}, hdr, data


def opcode(sass):
  words = sass.strip().split()
  if words and words[0].startswith("@") and len(words) > 1:
    words = words[1:]
  return words[0].split(".")[0] if words else ""


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--threshold", type=int, default=300)
  ap.add_argument("files", nargs="+")
  args = ap.parse_args()
  for path in args.files:
    ix, hdr, data = load(path)
    stalls = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    samples = lambda r: int(r[ix["Warp Stall Sampling (All Samples)"]] or 0)  # noqa: E731
    executed = lambda r: int(r[ix["Instructions Executed"]] or 0)  # noqa: E731
    by_reason, by_op, ex_op = collections.Counter(), collections.Counter(), collections.Counter()
    for r in data:
      for h in stalls:
        by_reason[h[6:]] += int(r[ix[h]] or 0)
      by_op[opcode(r[1])] += samples(r)
      ex_op[opcode(r[1])] += executed(r)
    print(f"## {path}: {sum(samples(r) for r in data)} samples, "
          f"{sum(executed(r) for r in data)} instructions executed")
    print("  stalls:", by_reason.most_common(10))
    print("  samples by op:", by_op.most_common(14))
    print("  executed by op:", ex_op.most_common(16))
    base = int(data[0][0], 16)
    for r in data:
      if samples(r) >= args.threshold:
        top = sorted(((int(r[ix[h]] or 0), h[6:]) for h in stalls), reverse=True)[:3]
        print(f"  {int(r[0], 16) - base:05x} {r[1].strip()[:56]:56s} {samples(r):6d} "
              f"ex={executed(r):>9d} " + " ".join(f"{h}:{v}" for v, h in top if v))


if __name__ == "__main__":
  main()
