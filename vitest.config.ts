import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["packages/*/test/**/*.test.ts", "test/**/*.test.ts"],
    // The VM scenarios (vm.test.ts, desktop.test.ts) boot a real guest: `npm run test:vm` (CI runs it after npm test).
    exclude: ["**/node_modules/**", "test/vm/vm.test.ts", "test/vm/desktop.test.ts"],
    // Real servers (Jupyter, sshd, Prometheus) start inside tests; 2-core CI machines need room.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: "forks",
    // One fixed seed for every property test; WS_FUZZ_SEED=random explores (test/support/fuzz-seed.ts).
    setupFiles: ["test/support/fuzz-seed.ts"],
    maxWorkers: 2,
    // One retry, and every test that needed it named as FLAKY at the end (test/support/flaky-reporter.ts).
    retry: 1,
    reporters: ["default", "./test/support/flaky-reporter.ts"],
  },
});
