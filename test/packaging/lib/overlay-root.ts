// A scratch root that is this machine's own root under an overlay, in a private mount namespace:
// packages can be installed into it with their real tools (apt, dpkg, rpm --root) and maintainer
// scripts, and nothing of the host changes. What the run changed is left in DIR/upper.
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { requireCommand, run, type RunResult } from "./tools.js";

export function requireOverlayRoot(): void {
  requireCommand("unshare", "util-linux");
  requireCommand("chroot", "coreutils");
  if (process.getuid?.() !== 0)
    throw new Error("a scratch root mounts an overlay and chroots: run this test as root (CI does)");
}

/** Runs `script` (sh) with $ROOT the overlay's merged view of /; /proc, /dev and an empty /run mounted in it. */
export function inOverlayRoot(dir: string, script: string, timeoutMs = 300_000): RunResult {
  for (const sub of ["upper", "work", "root"]) mkdirSync(path.join(dir, sub), { recursive: true });
  const runner = path.join(dir, "run.sh");
  writeFileSync(
    runner,
    `set -eu
ROOT=${dir}/root
mount -t overlay overlay -o lowerdir=/,upperdir=${dir}/upper,workdir=${dir}/work "$ROOT"
mount -t proc proc "$ROOT/proc"
mount --rbind /dev "$ROOT/dev"
mount -t tmpfs tmpfs "$ROOT/run"
${script}
`,
  );
  return run("unshare", ["--mount", "--propagation", "private", "sh", runner], { timeout: timeoutMs });
}
