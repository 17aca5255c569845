// The identity proof against the ways someone might fake it. Files are made
// as root and chowned to stand for other users; the end-to-end test with real
// accounts is ws-lease-users.test.ts.
import { execFile } from "node:child_process";
import { chmod, chown, link, lstat, mkdir, mkdtemp, readdir, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  newProofChallenge,
  prepareProofDir,
  proofDirFor,
  verifyProof,
  writeProof,
} from "../../src/lease/peer-proof.js";

let base: string;
let dir: string;

beforeAll(async () => {
  base = await mkdtemp(path.join(os.tmpdir(), "ws-proof-"));
  dir = path.join(base, "proof");
  await prepareProofDir(dir, 0);
});
afterAll(async () => {
  if (base) await rm(base, { recursive: true, force: true });
});

describe("the proof directory", () => {
  it("sits beside the socket, root-owned, mode 1733 (sticky, not listable)", async () => {
    expect(proofDirFor("/run/ws-agent/agent.sock")).toBe("/run/ws-agent/proof");
    const info = await lstat(dir);
    expect(info.mode & 0o7777).toBe(0o1733);
    expect(info.uid).toBe(0);
  });

  it("repairs its mode, clears what earlier clients left, refuses one owned by someone else or a symlink", async () => {
    await chmod(dir, 0o777);
    const outside = path.join(base, "outside");
    await writeFile(outside, "keep me");
    await writeFile(path.join(dir, "leftover"), "x");
    await mkdir(path.join(dir, "a-directory"));
    await symlink(outside, path.join(dir, "a-link"));
    await prepareProofDir(dir, 0);
    expect((await lstat(dir)).mode & 0o7777).toBe(0o1733);
    expect(await readdir(dir)).toEqual([]);
    expect((await lstat(outside)).isFile()).toBe(true);
    const foreign = path.join(base, "foreign");
    await mkdir(foreign);
    await chown(foreign, 1234, 1234);
    await expect(prepareProofDir(foreign, 0)).rejects.toThrow(/owned by uid 1234/);
    const linked = path.join(base, "linked");
    await symlink(dir, linked);
    await expect(prepareProofDir(linked, 0)).rejects.toThrow(/not a directory/);
  });

  it("never removes recursively and never follows a link: a full directory stays, a linked one's files stay", async () => {
    const outsideDir = path.join(base, "outside-dir");
    await mkdir(outsideDir, { recursive: true });
    await writeFile(path.join(outsideDir, "precious"), "keep me");
    await symlink(outsideDir, path.join(dir, "dir-link"));
    await mkdir(path.join(dir, "full"));
    await writeFile(path.join(dir, "full", "inner"), "x");
    const left = await prepareProofDir(dir, 0);
    expect(left).toEqual([`${JSON.stringify(path.join(dir, "full"))} (ENOTEMPTY)`]);
    expect(await readdir(dir)).toEqual(["full"]);
    expect(await readdir(outsideDir)).toEqual(["precious"]);
    await rm(path.join(dir, "full"), { recursive: true });
  });
});

describe("verifyProof", () => {
  it("takes the uid from the file's owner, and removes the file", async () => {
    const challenge = newProofChallenge();
    await writeProof(dir, challenge.name, challenge.nonce);
    await chown(path.join(dir, challenge.name), 1234, 1234);
    expect(await verifyProof(dir, challenge)).toEqual({ ok: true, uid: 1234 });
    expect(await readdir(dir)).not.toContain(challenge.name);
  });

  it("no file: refused", async () => {
    expect(await verifyProof(dir, newProofChallenge())).toEqual({
      ok: false,
      reason: "the proof file was not created",
    });
  });

  it("a symlink to someone else's file holding the nonce: refused", async () => {
    const challenge = newProofChallenge();
    const victim = path.join(base, "victim");
    await writeFile(victim, challenge.nonce, { mode: 0o600 });
    await chown(victim, 1234, 1234);
    await symlink(victim, path.join(dir, challenge.name));
    expect(await verifyProof(dir, challenge)).toMatchObject({ ok: false, reason: "the proof file is a symbolic link" });
    expect(await readdir(dir)).not.toContain(challenge.name);
  });

  it("a hard link to someone else's file: refused", async () => {
    const challenge = newProofChallenge();
    const victim = path.join(dir, "victim-original");
    await writeFile(victim, challenge.nonce, { mode: 0o600 });
    await chown(victim, 1234, 1234);
    await link(victim, path.join(dir, challenge.name));
    expect(await verifyProof(dir, challenge)).toMatchObject({
      ok: false,
      reason: "the proof file has other hard links",
    });
    await rm(victim);
  });

  it("wrong content, wrong mode, too large, a directory, a FIFO: refused, and nothing hangs", async () => {
    const wrongNonce = newProofChallenge();
    await writeFile(path.join(dir, wrongNonce.name), "0".repeat(32), { mode: 0o600 });
    expect(await verifyProof(dir, wrongNonce)).toMatchObject({
      ok: false,
      reason: "the proof file does not hold this connection's nonce",
    });

    const wrongMode = newProofChallenge();
    await writeFile(path.join(dir, wrongMode.name), wrongMode.nonce);
    await chmod(path.join(dir, wrongMode.name), 0o666);
    expect(await verifyProof(dir, wrongMode)).toMatchObject({
      ok: false,
      reason: "the proof file's mode is 666, not 600",
    });

    const large = newProofChallenge();
    await writeFile(path.join(dir, large.name), large.nonce + "x".repeat(1000), { mode: 0o600 });
    expect(await verifyProof(dir, large)).toMatchObject({ ok: false, reason: "the proof file is too large" });

    const directory = newProofChallenge();
    await mkdir(path.join(dir, directory.name));
    expect(await verifyProof(dir, directory)).toMatchObject({
      ok: false,
      reason: "the proof file is not a regular file",
    });
    await rm(path.join(dir, directory.name), { recursive: true });

    const fifo = newProofChallenge();
    await promisify(execFile)("mkfifo", ["-m", "600", path.join(dir, fifo.name)]);
    expect(await verifyProof(dir, fifo)).toMatchObject({ ok: false, reason: "the proof file is not a regular file" });
    expect(await readdir(dir)).toEqual([]);
  });
});

describe("writeProof (client side)", () => {
  it("creates a 0600 file exclusively, whatever the umask", async () => {
    const challenge = newProofChallenge();
    const previous = process.umask(0o277);
    try {
      await writeProof(dir, challenge.name, challenge.nonce);
    } finally {
      process.umask(previous);
    }
    expect((await lstat(path.join(dir, challenge.name))).mode & 0o777).toBe(0o600);
    await expect(writeProof(dir, challenge.name, challenge.nonce)).rejects.toThrow(/EEXIST/);
    expect(await verifyProof(dir, challenge)).toEqual({ ok: true, uid: 0 });
  });

  it("never follows a planted symlink, never writes outside the directory", async () => {
    const challenge = newProofChallenge();
    const target = path.join(base, "would-be-clobbered");
    await symlink(target, path.join(dir, challenge.name));
    await expect(writeProof(dir, challenge.name, challenge.nonce)).rejects.toThrow(/EEXIST/);
    await expect(lstat(target)).rejects.toThrow(/ENOENT/);
    await rm(path.join(dir, challenge.name));
    await expect(writeProof(dir, "../escape", "x")).rejects.toThrow(/invalid proof file name/);
  });
});
