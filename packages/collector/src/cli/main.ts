import { workerData } from "node:worker_threads";
import { isLeaderWorker, runLeaderWorker } from "../platform/kube/leader-thread.js";
import { isSweepWorker } from "../offline/whatif/sweep-role.js";

// The same bundle is the leader-election thread's script and a sweep's workers' script (platform/kube/leader-thread.ts); the CLI is
// loaded only on the main thread, so the election thread's heap holds the elector alone.
if (isLeaderWorker(workerData)) {
  runLeaderWorker(workerData);
} else if (isSweepWorker(workerData)) {
  // One slice of a `whatif --sweep --jobs N` (offline/whatif/sweep-workers.ts).
  void import("../offline/whatif/sweep-workers.js").then(({ runSweepWorker }) => runSweepWorker(workerData));
} else {
  void import("./cli.js").then(({ main }) =>
    main(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env }).then((code) => {
      process.exitCode = code;
      process.stdout.write("", () => process.stderr.write("", () => process.exit(code)));
    }),
  );
}
