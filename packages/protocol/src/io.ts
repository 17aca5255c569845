// What a command of either program gets from the process: its output streams and its environment.
// Passed in, never read from `process` inside a command, so tests run commands in-process.
export interface Io {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env: Record<string, string | undefined>;
}
