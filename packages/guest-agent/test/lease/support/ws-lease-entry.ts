// Entry point of the ws-lease bundle the tests run as other users.
import { leaseCommand } from "../../../src/lease/cli.js";

void leaseCommand(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env }).then(
  (code) => {
    process.exitCode = code;
  },
);
