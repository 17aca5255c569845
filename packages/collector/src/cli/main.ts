import { workerData } from "node:worker_threads";
import { isLeaderWorker, runLeaderWorker } from "../platform/kube/leader-thread.js";

// The same bundle is the leader-election thread's script (platform/kube/leader-thread.ts); the CLI is
// loaded only on the main thread, so the election thread's heap holds the elector alone.
if (isLeaderWorker(workerData)) {
  runLeaderWorker(workerData);
} else {
  void import("./cli.js").then(({ main }) =>
    main(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env }).then((code) => {
      process.exitCode = code;
      process.stdout.write("", () => process.stderr.write("", () => process.exit(code)));
    }),
  );
}
