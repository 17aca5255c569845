import { main } from "./cli.js";

main(process.argv[1] ?? "ws-agent", process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
}).then((code) => {
  process.exitCode = code;
  // gRPC channels and timers may outlive the command; exit once output is flushed.
  process.stdout.write("", () => process.stderr.write("", () => process.exit(code)));
});
