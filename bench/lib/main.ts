// The outer frame of a benchmark process: run it, print a failure's stack, exit non-zero on
// failure, and always undo what it started (cleanup steps run last-registered first).
export type Cleanup = () => Promise<unknown> | unknown;

export function runBenchmark(main: () => Promise<void>, cleanups: Cleanup[]): void {
  main()
    .catch((error: unknown) => {
      process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
      process.exitCode = 1;
    })
    .finally(async () => {
      for (const step of cleanups.reverse()) {
        try {
          await step();
        } catch (error) {
          process.stderr.write(`cleanup: ${(error as Error).message}\n`);
        }
      }
    });
}
