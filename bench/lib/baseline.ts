// Another commit's collector, built once into bench/.cache/baseline/<commit>/, so that a benchmark
// can run it beside this tree's under the same load in the same run ("main's figures beside ours").
//
// The commit's files come from `git archive`. Where its package-lock.json is this tree's, its
// third-party modules are this tree's node_modules (esbuild and Node resolve bare imports up the
// directory tree, and bench/.cache is inside it), and only its own workspace packages and their
// own node_modules are linked beside it; otherwise it gets its own `npm ci --ignore-scripts`. Then its own scripts/build.mjs.
import { spawnSync, type SpawnSyncOptions } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, symlinkSync } from "node:fs";
import path from "node:path";
import { repoRoot } from "./paths.js";

export interface BaselineCollector {
  /** The commit the ref named, in full. */
  commit: string;
  /** Its ws-collector.cjs. */
  bundle: string;
}

const WORKSPACES = ["protocol", "guest-agent", "collector"];

function run(command: string, args: readonly string[], options: SpawnSyncOptions, what: string): string {
  const result = spawnSync(command, args, { encoding: "utf8", maxBuffer: 64 * 1024 * 1024, ...options });
  if (result.error) throw new Error(`${what}: ${result.error.message}`);
  if (result.status !== 0)
    throw new Error(
      `${what} failed (exit ${result.status}): ${String(result.stderr ?? "")
        .trim()
        .slice(-600)}`,
    );
  return String(result.stdout ?? "");
}

/** The commit a ref names, or a clear error for one git does not know. */
export function resolveCommit(ref: string): string {
  if (ref.startsWith("-")) throw new Error(`--baseline: '${ref}' is not a git ref`);
  try {
    return run(
      "git",
      ["rev-parse", "--verify", "--quiet", `${ref}^{commit}`],
      { cwd: repoRoot },
      "git rev-parse",
    ).trim();
  } catch {
    throw new Error(`--baseline: git knows no commit '${ref}' in ${repoRoot} (a branch, tag or commit, e.g. 021e890)`);
  }
}

/** Builds (once) and returns the collector bundle of the commit `ref` names. */
export function baselineCollector(ref: string): BaselineCollector {
  const commit = resolveCommit(ref);
  const dir = path.join(repoRoot, "bench/.cache/baseline", commit);
  const bundle = path.join(dir, "packages/collector/dist/ws-collector.cjs");
  if (existsSync(bundle)) return { commit, bundle };
  const building = `${dir}.${process.pid}.partial`;
  rmSync(building, { recursive: true, force: true });
  mkdirSync(building, { recursive: true });
  try {
    const tar = `${building}.tar`;
    run("git", ["archive", "--format=tar", `--output=${tar}`, commit], { cwd: repoRoot }, "git archive");
    run("tar", ["-xf", tar, "-C", building], {}, "tar");
    rmSync(tar, { force: true });
    const sameLock =
      readFileSync(path.join(building, "package-lock.json"), "utf8") ===
      readFileSync(path.join(repoRoot, "package-lock.json"), "utf8");
    if (sameLock) {
      mkdirSync(path.join(building, "node_modules/@ws"), { recursive: true });
      for (const name of WORKSPACES) {
        if (!existsSync(path.join(building, "packages", name))) continue;
        symlinkSync(`../../packages/${name}`, path.join(building, "node_modules/@ws", name));
        // npm keeps a workspace's own versions of some packages in packages/<name>/node_modules.
        const own = path.join(repoRoot, "packages", name, "node_modules");
        if (existsSync(own)) symlinkSync(own, path.join(building, "packages", name, "node_modules"));
      }
    } else {
      process.stderr.write(
        `bench: ${commit.slice(0, 12)} has other dependencies: npm ci --ignore-scripts in its tree\n`,
      );
      run("npm", ["ci", "--ignore-scripts", "--no-audit", "--no-fund"], { cwd: building, stdio: "inherit" }, "npm ci");
    }
    run(process.execPath, ["scripts/build.mjs"], { cwd: building }, `building ${commit.slice(0, 12)}'s bundles`);
    rmSync(dir, { recursive: true, force: true });
    renameSync(building, dir);
  } catch (error) {
    rmSync(building, { recursive: true, force: true });
    throw error;
  }
  process.stderr.write(`bench: built the collector of ${commit.slice(0, 12)} for the baseline\n`);
  return { commit, bundle };
}
