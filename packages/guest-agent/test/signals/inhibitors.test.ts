/**
 * Inhibitor lock files: the parser on files logind (systemd 252, Debian 12) wrote on this
 * machine, on a hand-written file in the newer quoted format, and on malformed and cut ones;
 * the signal over fixture root trees.
 */
import { execFile } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { manualClock } from "../../src/clock.js";
import type { Roots } from "../../src/roots.js";
import { createInhibitorsSignal } from "../../src/signals/inhibitors.js";
import {
  cUnescape,
  InhibitorFileError,
  isIdleLock,
  parseInhibitorFile,
  reportedLocks,
} from "../../src/signals/inhibitors-parse.js";
import type { SignalContext } from "../../src/signals/types.js";
import { usersFrom } from "../../src/users.js";

const execFileAsync = promisify(execFile);
const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "fixtures", "inhibitors");
const fixture = (name: string) => readFile(path.join(fixtures, name), "utf8");

describe("parseInhibitorFile on files logind wrote", () => {
  it("reads an idle lock taken with systemd-inhibit --what=idle", async () => {
    expect(parseInhibitorFile(await fixture("idle-block-root"))).toEqual({
      what: "idle",
      whatList: ["idle"],
      who: "ws test",
      why: "Training run: keep the VM up",
      mode: "block",
      uid: 0,
      pid: 8743,
      fifo: "/run/systemd/inhibit/1.ref",
      problems: [],
    });
  });

  it("reads the uid of a lock taken by another user", async () => {
    expect(parseInhibitorFile(await fixture("idle-nobody"))).toMatchObject({
      uid: 65534,
      who: "nobody-job",
      why: "as nobody",
    });
  });

  it("undoes logind's C escaping: quotes, tabs, backslashes, UTF-8 as octal bytes, a literal $", async () => {
    const lock = parseInhibitorFile(await fixture("sleep-idle-escaped"));
    expect(lock.who).toBe('GNOME "Shell"');
    expect(lock.why).toBe("tab\tand \\ backslash; ümlaut=1 $HOME");
    expect(lock.whatList).toEqual(["sleep", "idle"]);
    expect(lock.problems).toEqual([]);
  });

  it("reads empty WHO and WHY as empty strings", async () => {
    expect(parseInhibitorFile(await fixture("idle-empty-who-why"))).toMatchObject({ who: "", why: "", what: "idle" });
  });

  it("tells idle locks from the others", async () => {
    const idle = ["idle-block-root", "idle-nobody", "sleep-idle-escaped", "idle-empty-who-why"];
    const other = ["handle-lid-switch", "sleep-delay"];
    for (const name of idle) expect(isIdleLock(parseInhibitorFile(await fixture(name))), name).toBe(true);
    for (const name of other) expect(isIdleLock(parseInhibitorFile(await fixture(name))), name).toBe(false);
    expect(parseInhibitorFile(await fixture("sleep-delay")).mode).toBe("delay");
  });
});

describe("parseInhibitorFile on hand-written, malformed and cut files", () => {
  it("reads newer systemd's format: PIDFDID, values double-quoted with shell escapes over C escapes", async () => {
    expect(parseInhibitorFile(await fixture("quoted-newer-systemd"))).toEqual({
      what: "sleep:idle",
      whatList: ["sleep", "idle"],
      who: 'GNOME "Shell"',
      why: "tab\tand \\ backslash; ümlaut=1 $HOME",
      mode: "block",
      uid: 1000,
      pid: 4242,
      fifo: "/run/systemd/inhibit/7.ref",
      problems: [],
    });
  });

  it("keeps a lock with bad fields, leaving them unset and saying why", async () => {
    const lock = parseInhibitorFile(await fixture("malformed-fields"));
    expect(lock).toMatchObject({ what: "idle", mode: "block", who: "\\q and \\x4", why: "ok" });
    expect(lock.uid).toBeUndefined();
    expect(lock.pid).toBeUndefined();
    expect(lock.problems.join("\n")).toMatch(/UID: not a valid id "abc"/);
    expect(lock.problems.join("\n")).toMatch(/PID: not a valid id ""/);
    expect(lock.problems.join("\n")).toMatch(/WHO: kept invalid escape\(s\) \\q \\x/);
    expect(lock.problems.join("\n")).toMatch(/not KEY=VALUE: "GARBAGE"/);
  });

  it("refuses a file without WHAT= with a clear error", async () => {
    const text = await fixture("malformed-no-what");
    expect(() => parseInhibitorFile(text)).toThrow(InhibitorFileError);
    expect(() => parseInhibitorFile(text)).toThrow(/no WHAT= line/);
    expect(() => parseInhibitorFile("")).toThrow(/no WHAT= line/);
    expect(() => parseInhibitorFile("\u0000\u00ff\u00fe")).toThrow(InhibitorFileError);
  });

  it("reads what a cut-off file holds and notes the cut", async () => {
    const lock = parseInhibitorFile(await fixture("truncated"));
    expect(lock).toMatchObject({ what: "sleep:idle", uid: 0, pid: 9729, who: "GNOME ", why: "" });
    expect(lock.fifo).toBeUndefined();
    expect(lock.problems).toContain("last line has no newline (file cut short?)");
  });

  it("notes unknown WHAT words and modes, and an unterminated quote", () => {
    const lock = parseInhibitorFile('WHAT=idle:teleport\nMODE=sideways\nWHO="half\n');
    expect(lock.whatList).toEqual(["idle", "teleport"]);
    expect(lock.who).toBe("half");
    expect(lock.problems).toEqual(["WHAT: unknown teleport", 'MODE: unknown "sideways"', "WHO: unterminated quotes"]);
  });

  it("cUnescape handles every escape logind's cescape writes, and \\x, \\u", () => {
    expect(cUnescape("\\a\\b\\f\\n\\r\\t\\v\\\\\\\"\\'\\s").value).toBe("\x07\b\f\n\r\t\v\\\"' ");
    expect(cUnescape("\\303\\274 \\x41 \\u00e9 \\U0001F600").value).toBe("ü A é 😀");
    expect(cUnescape("end\\")).toEqual({ value: "end\\", bad: ["\\"] });
    expect(cUnescape("\\400")).toEqual({ value: "\\400", bad: ["\\4"] });
  });
});

describe("reportedLocks", () => {
  it("reports idle locks only, drops those whose holder is gone, keeps those naming no pid", async () => {
    const idle = parseInhibitorFile(await fixture("idle-block-root"));
    const lid = parseInhibitorFile(await fixture("handle-lid-switch"));
    const noPid = parseInhibitorFile("WHAT=idle\nMODE=block\nUID=1000\nWHO=x\nWHY=y\n");
    expect(
      reportedLocks([
        { id: "1", lock: idle, holderAlive: true },
        { id: "2", lock: lid, holderAlive: true },
        { id: "3", lock: idle, holderAlive: false },
        { id: "4", lock: noPid, holderAlive: undefined },
      ]),
    ).toEqual({
      locks: [
        { who: "ws test", why: "Training run: keep the VM up", what: "idle", mode: "block", uid: 0, pid: 8743 },
        { who: "x", why: "y", what: "idle", mode: "block", uid: 1000 },
      ],
      stale: ["3"],
    });
  });
});

describe("inhibitors signal over a fixture root tree", () => {
  const scratch: string[] = [];
  afterAll(async () => {
    for (const dir of scratch) await rm(dir, { recursive: true, force: true });
  });

  async function rootTree(files: Record<string, string> | undefined, livePids: number[]): Promise<Roots> {
    const root = await mkdtemp(path.join(os.tmpdir(), "ws-inhibitors-"));
    scratch.push(root);
    const roots: Roots = {
      proc: path.join(root, "proc"),
      sys: path.join(root, "sys"),
      dev: path.join(root, "dev"),
      run: path.join(root, "run"),
      home: path.join(root, "home"),
      etc: path.join(root, "etc"),
      state: path.join(root, "state"),
    };
    await mkdir(path.join(roots.run, "systemd"), { recursive: true });
    for (const pid of livePids) await mkdir(path.join(roots.proc, String(pid)), { recursive: true });
    if (files) {
      const dir = path.join(roots.run, "systemd", "inhibit");
      await mkdir(dir);
      for (const [id, name] of Object.entries(files)) {
        await copyFile(path.join(fixtures, name), path.join(dir, id));
        // The holder's FIFO beside each file, as logind makes it.
        await execFileAsync("mkfifo", ["-m", "600", path.join(dir, `${id}.ref`)]);
      }
    }
    return roots;
  }

  const context = (roots: Roots): SignalContext => ({
    roots,
    clock: manualClock(),
    users: usersFrom([]),
    signal: new AbortController().signal,
  });

  it("is absent where logind keeps no state at all", async () => {
    const outcome = await createInhibitorsSignal().collect(context(await rootTree(undefined, [])));
    expect(outcome).toEqual({
      state: "absent",
      message: expect.stringMatching(/systemd\/inhibit absent .*logind is not running/),
    });
  });

  it("is ok and empty where logind runs but no lock was taken since boot (it makes the directory lazily)", async () => {
    const roots = await rootTree(undefined, []);
    await mkdir(path.join(roots.run, "systemd", "seats"));
    await writeFile(
      path.join(roots.run, "systemd", "seats", "seat0"),
      "# This is private data. Do not parse.\nIS_SEAT0=1\n",
    );
    expect(await createInhibitorsSignal().collect(context(roots))).toEqual({ state: "ok", value: { locks: [] } });
  });

  it("is ok and empty with no locks", async () => {
    expect(await createInhibitorsSignal().collect(context(await rootTree({}, [])))).toEqual({
      state: "ok",
      value: { locks: [] },
    });
  });

  it("reports the live idle locks in id order and says which were stale or unreadable", async () => {
    const roots = await rootTree(
      {
        "12": "idle-nobody", // pid 8746, alive
        "2": "idle-block-root", // pid 8743, gone
        "3": "handle-lid-switch",
        "1": "sleep-idle-escaped", // pid 9729, alive
        "7": "malformed-no-what",
      },
      [8746, 9729, 8745],
    );
    await writeFile(path.join(roots.run, "systemd", "inhibit", ".#4tmpXYZ"), "WHAT=idle\n");
    const outcome = await createInhibitorsSignal().collect(context(roots));
    expect(outcome.state).toBe("ok");
    if (outcome.state !== "ok") return;
    expect(outcome.value.locks).toEqual([
      {
        who: 'GNOME "Shell"',
        why: "tab\tand \\ backslash; ümlaut=1 $HOME",
        what: "sleep:idle",
        mode: "block",
        uid: 0,
        pid: 9729,
      },
      { who: "nobody-job", why: "as nobody", what: "idle", mode: "block", uid: 65534, pid: 8746 },
    ]);
    expect(outcome.message).toMatch(/inhibit\/7: no WHAT= line/);
    expect(outcome.message).toMatch(/ignored stale idle lock\(s\) 2: holder process gone/);
  });

  it("fails, naming the file, when every lock file is unreadable", async () => {
    const roots = await rootTree({ "1": "malformed-no-what" }, []);
    const outcome = await createInhibitorsSignal().collect(context(roots));
    expect(outcome).toMatchObject({ state: "failed", value: { locks: [] } });
    expect(outcome.message).toMatch(/inhibit\/1: no WHAT= line/);
  });
});
