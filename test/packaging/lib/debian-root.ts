// A Debian root to install the package into, made by debootstrap from the same mirror and release
// apt uses on this machine. debootstrap takes minutes, so the finished tree is kept as a tarball
// in a cache directory (WS_TEST_CACHE, default /var/cache/ws-tests) and unpacked for each run.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import path from "node:path";
import { requireCommand, run, runOk } from "./tools.js";

/** VERSION_CODENAME from /etc/os-release text. */
export function osCodename(osRelease: string): string | null {
  return /^VERSION_CODENAME="?([a-z]+)"?$/m.exec(osRelease)?.[1] ?? null;
}

/**
 * The mirror URI serving `suite` with component main, from apt's sources: deb822 stanzas
 * (*.sources) and one-line entries (*.list). Pure.
 */
export function aptMirror(sources: { name: string; text: string }[], suite: string): string | null {
  for (const { name, text } of sources) {
    if (name.endsWith(".sources")) {
      for (const stanza of text.split(/\n\s*\n/)) {
        const field = (key: string) =>
          new RegExp(`^${key}:\\s*(.+)$`, "mi").exec(stanza)?.[1]?.trim().split(/\s+/) ?? [];
        if (field("Types").includes("deb") && field("Suites").includes(suite) && field("Components").includes("main")) {
          const uri = field("URIs")[0];
          if (uri) return uri;
        }
      }
    } else {
      for (const line of text.split("\n")) {
        const match = /^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s+(.+)$/.exec(line.trim());
        if (match && match[2] === suite && match[3]!.split(/\s+/).includes("main")) return match[1]!;
      }
    }
  }
  return null;
}

function readAptSources(): { name: string; text: string }[] {
  const files: string[] = [];
  if (existsSync("/etc/apt/sources.list")) files.push("/etc/apt/sources.list");
  if (existsSync("/etc/apt/sources.list.d")) {
    for (const name of readdirSync("/etc/apt/sources.list.d").sort()) {
      if (name.endsWith(".list") || name.endsWith(".sources")) files.push(path.join("/etc/apt/sources.list.d", name));
    }
  }
  return files.map((file) => ({ name: file, text: readFileSync(file, "utf8") }));
}

export interface DebianRootOptions {
  /** Packages debootstrap adds to the minbase variant. */
  include: string[];
  cacheDir?: string;
}

/** Unpacks a minbase Debian root (with `include`) into `target`, debootstrapping it once. */
export function makeDebianRoot(target: string, options: DebianRootOptions): void {
  requireCommand("debootstrap", "debootstrap");
  const codename = osCodename(readFileSync("/etc/os-release", "utf8"));
  if (!codename)
    throw new Error(
      "cannot read VERSION_CODENAME from /etc/os-release: these tests debootstrap this machine's Debian release",
    );
  const mirror = aptMirror(readAptSources(), codename);
  if (!mirror)
    throw new Error(`no apt source serves ${codename} main (looked in /etc/apt/sources.list and sources.list.d)`);
  const cacheDir = options.cacheDir ?? process.env.WS_TEST_CACHE ?? "/var/cache/ws-tests";
  const key = createHash("sha256")
    .update([codename, mirror, ...options.include].join(" "))
    .digest("hex")
    .slice(0, 12);
  const tarball = path.join(cacheDir, `debootstrap-${codename}-minbase-${key}.tar`);
  if (!existsSync(tarball)) {
    mkdirSync(cacheDir, { recursive: true });
    const build = path.join(cacheDir, `build-${process.pid}`);
    rmSync(build, { recursive: true, force: true });
    try {
      const result = run("debootstrap", [
        "--variant=minbase",
        `--include=${options.include.join(",")}`,
        codename,
        build,
        mirror,
      ]);
      if (result.status !== 0)
        throw new Error(`debootstrap ${codename} from ${mirror} failed:\n${result.output.slice(-4000)}`);
      runOk("tar", ["--numeric-owner", "-C", build, "-cf", `${tarball}.partial`, "."]);
      renameSync(`${tarball}.partial`, tarball);
    } finally {
      rmSync(build, { recursive: true, force: true });
      rmSync(`${tarball}.partial`, { force: true });
    }
  }
  mkdirSync(target, { recursive: true });
  runOk("tar", ["--numeric-owner", "-C", target, "-xf", tarball]);
}
