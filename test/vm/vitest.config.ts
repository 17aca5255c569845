// `npm run test:vm` (scripts/test-vm.mjs): the VM tests, apart from `npm test` (the root config
// excludes test/vm/). One worker: the guests are emulated and the machine has two cores.
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

export default defineConfig({
  root: fileURLToPath(new URL("../..", import.meta.url)),
  test: {
    include: ["test/vm/**/*.test.ts"],
    // A cold cache builds the image (debootstrap) in beforeAll; each scenario waits on emulated boots.
    hookTimeout: 20 * 60_000,
    testTimeout: 12 * 60_000,
    pool: "forks",
    maxWorkers: 1,
    fileParallelism: false,
    reporters: ["verbose"],
  },
});
