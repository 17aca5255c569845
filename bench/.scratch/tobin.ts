import { toBinary, fromBinary } from "@bufbuild/protobuf";
import { ReportSchema } from "@ws/protocol";
import { reportFor, TYPICAL_VM } from "/work/clones/issue-27/bench/lib/reports.js";
const r = reportFor(TYPICAL_VM, 100);
const b = toBinary(ReportSchema, r);
for (let k = 0; k < 3; k++) {
  let t = performance.now();
  for (let i = 0; i < 10000; i++) toBinary(ReportSchema, r);
  const enc = (performance.now() - t) / 10000;
  t = performance.now();
  for (let i = 0; i < 10000; i++) fromBinary(ReportSchema, b);
  const dec = (performance.now() - t) / 10000;
  console.log(`toBinary ${(enc * 1000).toFixed(1)} µs, fromBinary ${(dec * 1000).toFixed(1)} µs, ${b.length} B`);
}
