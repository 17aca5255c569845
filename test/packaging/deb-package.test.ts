// The Debian package as built by scripts/build-deb.mjs, read with dpkg-deb and the real man,
// shellcheck and node: what it contains, with which modes, its control data, its man pages, and
// the ws-lease name dispatch through the symlink.
import { createHash } from "node:crypto";
import { lstatSync, mkdtempSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { debianPackageVersion, debianVersion } from "../../packaging/deb/debian-version.mjs";
import { helpToMan, roffEscape, splitUsage } from "../../packaging/deb/manpage.mjs";
import { repoRoot } from "../support/process.js";
import { buildDeb, rootVersion } from "./lib/artifacts.js";
import { requireCommand, run, runOk } from "./lib/tools.js";

let work: string;
let deb: string;
let tree: string;

beforeAll(() => {
  work = mkdtempSync(path.join(os.tmpdir(), "ws-deb-"));
  deb = buildDeb(path.join(work, "out"));
  tree = path.join(work, "tree");
  runOk("dpkg-deb", ["-x", deb, tree]);
}, 120_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

function field(name: string): string {
  return runOk("dpkg-deb", ["--field", deb, name]).stdout.trim();
}

describe("the .deb", () => {
  it("is named and versioned from the root package.json with a Debian revision, architecture all", () => {
    expect(path.basename(deb)).toBe(`ws-agent_${debianPackageVersion(rootVersion)}_all.deb`);
    expect(field("Package")).toBe("ws-agent");
    expect(field("Version")).toBe(`${debianVersion(rootVersion)}-1`);
    expect(field("Architecture")).toBe("all");
    expect(field("Depends")).toMatch(/(^|, )nodejs \(>= 18\)(,|$)/);
    expect(field("Depends")).toMatch(/(^|, )init-system-helpers \(>= [^)]+\)(,|$)/);
    // A real address that reaches people, not root@localhost.
    expect(field("Maintainer")).toBe("ws maintainers <ws@aik8s.run>");
    expect(Number(field("Installed-Size"))).toBeGreaterThan(100);
  });

  it("holds exactly the agent, its two names, the units, the udev rule, the config, man pages and docs", () => {
    const listing = runOk("dpkg-deb", ["-c", deb]).stdout.trim().split("\n");
    const entries = new Map(
      listing.map((line) => {
        const [mode, owner, , , , ...rest] = line.split(/\s+/);
        const name = rest
          .join(" ")
          .replace(/^\.\//, "/")
          .replace(/ -> .*$/, "");
        return [name, { mode: mode!, owner: owner! }];
      }),
    );
    const files = [...entries]
      .filter(([, e]) => !e.mode.startsWith("d"))
      .map(([name]) => name)
      .sort();
    expect(files).toEqual(
      [
        "/etc/ws-agent/config.yaml",
        "/lib/systemd/system/run-ws-credential.mount",
        "/lib/systemd/system/ws-agent-grow.path",
        "/lib/systemd/system/ws-agent-grow.service",
        "/lib/systemd/system/ws-agent.service",
        "/lib/udev/rules.d/99-ws-agent-grow.rules",
        "/usr/bin/ws-agent",
        "/usr/bin/ws-lease",
        "/usr/lib/ws-agent/ws-agent.cjs",
        "/usr/share/doc/ws-agent/README.md",
        "/usr/share/doc/ws-agent/changelog.Debian.gz",
        "/usr/share/doc/ws-agent/copyright",
        "/usr/share/lintian/overrides/ws-agent",
        "/usr/share/man/man1/ws-lease.1.gz",
        "/usr/share/man/man8/ws-agent.8.gz",
      ].sort(),
    );
    for (const [name, entry] of entries) {
      expect(entry.owner, name).toBe("root/root");
      if (entry.mode.startsWith("d")) expect(entry.mode, name).toBe("drwxr-xr-x");
    }
    expect(entries.get("/usr/lib/ws-agent/ws-agent.cjs")!.mode).toBe("-rwxr-xr-x");
    expect(entries.get("/usr/bin/ws-agent")!.mode).toBe("lrwxrwxrwx");
    for (const name of [
      "/etc/ws-agent/config.yaml",
      "/lib/systemd/system/ws-agent.service",
      "/usr/share/man/man8/ws-agent.8.gz",
    ]) {
      expect(entries.get(name)!.mode, name).toBe("-rw-r--r--");
    }
  });

  it("ships the bundle unchanged and points both names at it", () => {
    const shipped = readFileSync(path.join(tree, "usr/lib/ws-agent/ws-agent.cjs"));
    const built = readFileSync(path.join(repoRoot, "packages/guest-agent/dist/ws-agent.cjs"));
    expect(createHash("sha256").update(shipped).digest("hex")).toBe(createHash("sha256").update(built).digest("hex"));
    for (const name of ["ws-agent", "ws-lease"]) {
      expect(lstatSync(path.join(tree, "usr/bin", name)).isSymbolicLink()).toBe(true);
      expect(readlinkSync(path.join(tree, "usr/bin", name))).toBe("../lib/ws-agent/ws-agent.cjs");
    }
  });

  it("dispatches on the name it is started under: node keeps the symlink's name in argv[1]", () => {
    const node = path.dirname(process.execPath);
    const env = { PATH: `${node}:/usr/bin:/bin` };
    const lease = run(path.join(tree, "usr/bin/ws-lease"), ["--help"], { env });
    expect(lease.status, lease.output).toBe(0);
    expect(lease.stdout).toMatch(/^ws-lease - keep this VM running/);
    const agent = run(path.join(tree, "usr/bin/ws-agent"), ["version"], { env });
    expect(agent.status, agent.output).toBe(0);
    expect(agent.stdout.trim()).toBe(`ws-agent ${rootVersion}`);
  });

  it("marks the config as a conffile and carries md5sums of every file", () => {
    const control = path.join(work, "control");
    runOk("dpkg-deb", ["-e", deb, control]);
    expect(readFileSync(path.join(control, "conffiles"), "utf8")).toBe("/etc/ws-agent/config.yaml\n");
    const sums = readFileSync(path.join(control, "md5sums"), "utf8").trim().split("\n");
    for (const line of sums) {
      const [sum, file] = line.split(/\s+/);
      expect(
        createHash("md5")
          .update(readFileSync(path.join(tree, file!)))
          .digest("hex"),
        file,
      ).toBe(sum);
    }
    expect(sums.map((l) => l.split(/\s+/)[1])).toContain("usr/lib/ws-agent/ws-agent.cjs");
    for (const script of ["postinst", "prerm", "postrm"]) {
      expect(lstatSync(path.join(control, script)).mode & 0o777, script).toBe(0o755);
    }
  });

  it("is lintian clean, pedantic tags included (the two overrides say why)", () => {
    requireCommand("lintian", "lintian");
    const result = run("lintian", ["--pedantic", "--display-info", "--fail-on", "error,warning,info,pedantic", deb]);
    const tags = result.stdout.split("\n").filter((line) => /^[EWIPX]: /.test(line));
    expect(tags, result.output).toEqual([]);
    expect(result.status, result.output).toBe(0);
    // Only the overrides the package ships, each with its reason.
    const overrides = run("lintian", ["--pedantic", "--display-info", "--show-overrides", deb])
      .stdout.split("\n")
      .filter((line) => line.startsWith("O: "));
    expect(overrides.map((line) => line.replace(/ \[.*$/, "")).sort()).toEqual([
      "O: ws-agent: initial-upload-closes-no-bugs",
      "O: ws-agent: package-supports-alternative-init-but-no-init.d-script",
    ]);
  });

  it("carries a Debian changelog whose top entry is this version, and a machine-readable copyright", () => {
    const changelog = gunzipSync(readFileSync(path.join(tree, "usr/share/doc/ws-agent/changelog.Debian.gz"))).toString(
      "utf8",
    );
    expect(changelog.split("\n")[0]).toBe(`ws-agent (${debianPackageVersion(rootVersion)}) unstable; urgency=medium`);
    expect(changelog).toMatch(
      /^ -- ws maintainers <ws@aik8s\.run> {2}\w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} [+-]\d{4}$/m,
    );
    const parsed = run("dpkg-parsechangelog", ["-l", "-", "-S", "Version"], { input: changelog });
    expect(parsed.stdout.trim(), parsed.output).toBe(debianPackageVersion(rootVersion));
    const copyright = readFileSync(path.join(tree, "usr/share/doc/ws-agent/copyright"), "utf8");
    expect(copyright).toMatch(
      /^Format: https:\/\/www\.debian\.org\/doc\/packaging-manuals\/copyright-format\/1\.0\/$/m,
    );
    expect(copyright).toMatch(/^Copyright: \d{4}/m);
    expect(copyright).toMatch(/^License: Apache-2\.0$/m);
  });

  it("has maintainer scripts that shellcheck finds clean as POSIX sh", () => {
    requireCommand("shellcheck", "shellcheck");
    const scripts = ["postinst", "prerm", "postrm"].map((s) => path.join(repoRoot, "packaging/deb", s));
    const result = run("shellcheck", ["--shell=sh", ...scripts]);
    expect(result.status, result.output).toBe(0);
  });

  it("ships a default config that is all comments, which the agent reads as empty", () => {
    const text = readFileSync(path.join(tree, "etc/ws-agent/config.yaml"), "utf8");
    for (const line of text.split("\n")) expect(line === "" || line.startsWith("#"), line).toBe(true);
    // `run` with only this file: no YAML or unknown-key error, just the missing settings named.
    const agent = run(
      process.execPath,
      [
        path.join(tree, "usr/lib/ws-agent/ws-agent.cjs"),
        "run",
        "--config",
        path.join(tree, "etc/ws-agent/config.yaml"),
      ],
      {
        env: { PATH: "/usr/bin:/bin" },
      },
    );
    expect(agent.status, agent.output).toBe(3);
    expect(agent.stderr).toMatch(/no collector address: set collector\.address in /);
    expect(agent.stderr).not.toMatch(/not valid YAML|unknown setting/);
  });

  it("is reproducible: the same sources and SOURCE_DATE_EPOCH give the same bytes", () => {
    const again = buildDeb(path.join(work, "again"));
    const sha = (file: string) => createHash("sha256").update(readFileSync(file)).digest("hex");
    expect(sha(again)).toBe(sha(deb));
  });
});

describe("the man pages", () => {
  it("render with man without warnings, from the --help texts", () => {
    requireCommand("man", "man-db");
    for (const [page, expected] of [
      [
        "usr/share/man/man8/ws-agent.8.gz",
        ["WS-AGENT(8)", "ws-agent - the in-guest agent", "ws-agent probe", "--collector HOST:PORT", "ws-lease(1)"],
      ],
      [
        "usr/share/man/man1/ws-lease.1.gz",
        ["WS-LEASE(1)", "ws-lease - keep this VM running", "CONFIRMATION AND CLAMPING", "ws-lease 8h --reason"],
      ],
    ] as const) {
      const result = run("man", ["--warnings", "-l", "-Tutf8", path.join(tree, page)], {
        env: { ...process.env, MANWIDTH: "100", MAN_KEEP_FORMATTING: "0" },
      });
      expect(result.status, result.output).toBe(0);
      expect(result.stderr, `man warned about ${page}`).toBe("");
      // biome-ignore lint/suspicious/noControlCharactersInRegex: man(1) marks bold and underline with backspaces
      const text = result.stdout.replace(/.\x08/g, ""); // overstrike bold/underline
      for (const phrase of expected) expect(text, `${page} lacks "${phrase}"`).toContain(phrase);
    }
  });

  it("escapes what roff would read as requests or escapes", () => {
    expect(roffEscape(".hidden")).toBe("\\&.hidden");
    expect(roffEscape("'quoted")).toBe("\\&'quoted");
    expect(roffEscape("a\\b --flag")).toBe("a\\eb \\-\\-flag");
  });

  it("turns a usage-shaped help text into NAME, SYNOPSIS, DESCRIPTION and COMMANDS", () => {
    const page = helpToMan({
      name: "tool",
      section: 8,
      date: "2026-01-01",
      source: "ws 1.0.0",
      manual: "System Administration",
      help: "tool 1.0.0 — does things\n\nUsage: tool <command>\n\nCommands:\n  go   Go\n",
      commands: [{ name: "go", help: "Usage: tool go [--fast]\n\nGoes.\n" }],
    });
    expect(page).toContain('.TH TOOL 8 "2026-01-01" "ws 1.0.0" "System Administration"');
    expect(page).toContain(".SH NAME\ntool \\- does things\n");
    expect(page).toContain(".SH SYNOPSIS\n.nf\ntool <command>\n.fi");
    expect(page).toContain(".SS tool go\n.nf\nUsage: tool go [\\-\\-fast]");
  });

  it("refuses a help text with neither a NAME section nor a Usage line", () => {
    expect(() => splitUsage("just words\n")).toThrow(/neither a NAME section nor a "Usage:" line/);
  });
});

describe("Debian versions", () => {
  it("sort a pre-release before its release, as dpkg compares them", () => {
    expect(debianVersion("1.2.3")).toBe("1.2.3");
    expect(debianVersion("1.2.3-rc.1")).toBe("1.2.3~rc.1");
    expect(debianVersion("1.2.3+build.5")).toBe("1.2.3+build.5");
    expect(debianVersion("not-a-version")).toBeNull();
    const compare = run("dpkg", ["--compare-versions", debianVersion("1.0.0-rc.1")!, "lt", debianVersion("1.0.0")!]);
    expect(compare.status).toBe(0);
  });
});
