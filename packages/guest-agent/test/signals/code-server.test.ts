import { create } from "@bufbuild/protobuf";
import { CodeServerSignalSchema } from "@ws/protocol";
import { chown, mkdir, mkdtemp, rm, symlink, utimes, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { manualClock } from "../../src/clock.js";
import type { Roots } from "../../src/roots.js";
import { createCodeServerSignal, HEARTBEAT_PATH } from "../../src/signals/code-server.js";
import { heartbeatInstance } from "../../src/signals/code-server-parse.js";
import type { SignalContext } from "../../src/signals/types.js";
import { loadUsers, parsePasswd, usersFrom } from "../../src/users.js";

const PASSWD = [
  "root:x:0:0:root:/root:/bin/bash",
  "alice:x:1000:1000:Alice:/home/alice:/bin/bash",
  "bob:x:1001:1001:Bob:/srv/bob:/bin/bash",
  "carol:x:1002:1002:Carol:/home/carol:/bin/bash",
].join("\n");

const NOW_MS = 1_800_000_000_000;

async function machineTree(base: string): Promise<Roots> {
  const roots: Roots = {
    proc: path.join(base, "proc"),
    sys: path.join(base, "sys"),
    dev: path.join(base, "dev"),
    run: path.join(base, "run"),
    home: path.join(base, "home"),
    etc: path.join(base, "etc"),
    state: path.join(base, "state"),
  };
  await mkdir(roots.etc, { recursive: true });
  await mkdir(roots.home, { recursive: true });
  await writeFile(path.join(roots.etc, "passwd"), `${PASSWD}\n`);
  return roots;
}

/** Writes a heartbeat as code-server does (an empty file) and dates it `ageSeconds` before NOW_MS. */
async function heartbeat(home: string, ageSeconds: number, uid: number): Promise<string> {
  const file = path.join(home, HEARTBEAT_PATH);
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, "");
  await chown(file, uid, uid);
  await chown(home, uid, uid); // the agent trusts a file in a home only when the home's owner (or root) owns it
  const when = new Date(NOW_MS - ageSeconds * 1000);
  await utimes(file, when, when);
  return file;
}

async function contextFor(roots: Roots): Promise<SignalContext> {
  return { roots, clock: manualClock(NOW_MS), users: await loadUsers(roots), signal: new AbortController().signal };
}

describe("code-server signal", () => {
  let scratch: string;

  beforeAll(async () => {
    scratch = await mkdtemp(path.join(os.tmpdir(), "ws-code-server-"));
  });

  afterAll(async () => {
    await rm(scratch, { recursive: true, force: true });
  });

  it("reports each user's heartbeat age: under the home root, in a passwd-only home, and root's", async () => {
    const roots = await machineTree(path.join(scratch, "machine"));
    const machine = path.dirname(roots.etc);
    const alice = await heartbeat(path.join(roots.home, "alice"), 30, 1000);
    const bob = await heartbeat(path.join(machine, "srv", "bob"), 7200, 1001);
    const root = await heartbeat(path.join(machine, "root"), 0, 0);
    await mkdir(path.join(roots.home, "carol", ".local", "share"), { recursive: true }); // no code-server

    const outcome = await createCodeServerSignal().collect(await contextFor(roots));
    expect(outcome).toEqual({
      state: "ok",
      value: {
        instances: [
          { user: "alice", uid: 1000, heartbeatFile: alice, heartbeatAgeSeconds: 30 },
          { user: "root", uid: 0, heartbeatFile: root, heartbeatAgeSeconds: 0 },
          { user: "bob", uid: 1001, heartbeatFile: bob, heartbeatAgeSeconds: 7200 },
        ],
      },
    });
    if (outcome.state === "ok") create(CodeServerSignalSchema, outcome.value);
  });

  it("is absent when no user has run code-server", async () => {
    const roots = await machineTree(path.join(scratch, "no-code-server"));
    await mkdir(path.join(roots.home, "alice"), { recursive: true });
    expect(await createCodeServerSignal().collect(await contextFor(roots))).toEqual({
      state: "absent",
      message: "no code-server heartbeat in any home",
    });
  });

  it("is absent on a machine with no home root at all", async () => {
    const roots = await machineTree(path.join(scratch, "bare"));
    await rm(roots.home, { recursive: true });
    expect((await createCodeServerSignal().collect(await contextFor(roots))).state).toBe("absent");
  });

  it("reports a heartbeat path that is not a file, and still reports the others", async () => {
    const roots = await machineTree(path.join(scratch, "odd"));
    await heartbeat(path.join(roots.home, "alice"), 60, 1000);
    const odd = path.join(roots.home, "carol", HEARTBEAT_PATH);
    await mkdir(odd, { recursive: true });
    const outcome = await createCodeServerSignal().collect(await contextFor(roots));
    expect(outcome.state).toBe("ok");
    expect(outcome.message).toBe(`${odd}: a directory, not a regular file: ignored`);
    if (outcome.state === "ok") expect(outcome.value.instances?.map((i) => i.user)).toEqual(["alice"]);
  });

  it("fails, with the reason, when the home root cannot be read and nothing was found", async () => {
    const roots = await machineTree(path.join(scratch, "unreadable"));
    // A symlink loop where the home root should be: listing it fails with something other than
    // "missing" (tests run as root, so permissions cannot make it unreadable).
    await rm(roots.home, { recursive: true });
    await symlink(roots.home, roots.home);
    const outcome = await createCodeServerSignal().collect(await contextFor(roots));
    expect(outcome.state).toBe("failed");
    expect(outcome.message).toMatch(/home: ELOOP/);
  });

  it("turns a heartbeat's mtime into an age, never negative", () => {
    const users = usersFrom(parsePasswd(PASSWD));
    expect(heartbeatInstance("/home/alice/hb", { uid: 1000, mtimeMs: NOW_MS - 90_500 }, users, NOW_MS)).toEqual({
      user: "alice",
      uid: 1000,
      heartbeatFile: "/home/alice/hb",
      heartbeatAgeSeconds: 90.5,
    });
    expect(heartbeatInstance("/x", { uid: 4242, mtimeMs: NOW_MS + 5000 }, users, NOW_MS)).toMatchObject({
      user: "",
      uid: 4242,
      heartbeatAgeSeconds: 0,
    });
  });
});
