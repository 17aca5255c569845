// The pure test tier (`npm run test:unit`): parsers, engine, policy, replay, protocol, formatting.
// No root, no Debian packages, no servers, no built bundles: what a contributor runs on every
// change, in well under a minute. `npm test` runs this tier as an unprivileged user first (so a
// test that quietly needs root cannot join it), then every test, this tier included.
//
// Everything under test/ is cross-package or end-to-end and is never here. A test under
// packages/*/test that starts a real part (Jupyter, sshd, logind, a loop device, a pty, promtool,
// the fake Kubernetes API, a child process) or needs root (chown of fixture trees) is listed in
// NEEDS_ROOT_OR_REAL_PARTS.
import os from "node:os";
import path from "node:path";
import { defineConfig } from "vitest/config";

export const NEEDS_ROOT_OR_REAL_PARTS = [
  "packages/collector/test/agents/connection-slots-grpc.test.ts", // openssl, sockets from 127.0.0.2
  "packages/collector/test/agents/limits.test.ts",
  "packages/collector/test/platform/kube/rbac.test.ts",
  "packages/collector/test/platform/kube/stop.test.ts",
  "packages/collector/test/metrics/metrics.test.ts",
  "packages/collector/test/offline/whatif/whatif.test.ts",
  "packages/guest-agent/test/fs/user-file.test.ts",
  "packages/guest-agent/test/fs/user-path-cache.test.ts", // chowns homes to a test user: root
  "packages/guest-agent/test/signals/home-scan.test.ts", // homes owned by real accounts: root
  "packages/guest-agent/test/grow/grow-loop.test.ts",
  "packages/guest-agent/test/lease/cli.test.ts",
  "packages/guest-agent/test/lease/durable.test.ts",
  "packages/guest-agent/test/lease/peer-proof.test.ts",
  "packages/guest-agent/test/lease/run.test.ts",
  "packages/guest-agent/test/lease/schedule-cli.test.ts",
  "packages/guest-agent/test/lease/service.test.ts",
  "packages/guest-agent/test/lease/ws-lease-users.test.ts",
  "packages/guest-agent/test/notice/delivery.test.ts",
  "packages/guest-agent/test/notice/desktop.test.ts",
  "packages/guest-agent/test/notice/terminals.test.ts",
  "packages/guest-agent/test/notice/through-agent.test.ts",
  "packages/guest-agent/test/seal/seal-parse.test.ts",
  "packages/guest-agent/test/seal/seal-tree.test.ts",
  "packages/guest-agent/test/signals/code-server.test.ts",
  "packages/guest-agent/test/signals/desktop.test.ts",
  "packages/guest-agent/test/signals/disk.test.ts",
  "packages/guest-agent/test/signals/gpu-command.test.ts",
  "packages/guest-agent/test/signals/inhibitors.logind.test.ts",
  "packages/guest-agent/test/signals/inhibitors.test.ts",
  "packages/guest-agent/test/signals/jupyter-discovery.test.ts",
  "packages/guest-agent/test/signals/jupyter-terminal.test.ts",
  "packages/guest-agent/test/signals/jupyter.test.ts",
  "packages/guest-agent/test/signals/remote-sessions.sshd.test.ts",
  "packages/guest-agent/test/signals/sessions.sshd.test.ts",
  "packages/guest-agent/test/signals/sessions.test.ts",
  "packages/guest-agent/test/signals/system.test.ts",
];

export default defineConfig({
  cacheDir: path.join(os.tmpdir(), "ws-vitest-unit-cache"),
  test: {
    include: ["packages/*/test/**/*.test.ts"],
    exclude: ["**/node_modules/**", ...NEEDS_ROOT_OR_REAL_PARTS],
    pool: "threads",
    // One fixed seed for every property test; WS_FUZZ_SEED=random explores (test/support/fuzz-seed.ts).
    setupFiles: ["test/support/fuzz-seed.ts"],
    // Vitest's 5 s default is a time assertion in disguise: the property tests (3,000 codec
    // mutations, the classifier at every phase) take a second here and five on a busy laptop.
    testTimeout: 60_000,
  },
});
