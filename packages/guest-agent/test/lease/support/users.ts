// Local accounts for tests that need a second and third person on the machine.
import { execFile } from "node:child_process";
import { promisify } from "node:util";

const run = promisify(execFile);

export interface TestUser {
  name: string;
  uid: number;
  gid: number;
}

/** Creates the account if it is missing (idempotent); fails with the package to install when useradd is absent. */
export async function ensureUser(name: string): Promise<TestUser> {
  try {
    return await lookup(name);
  } catch {
    // not there yet
  }
  // Other test files create accounts at the same time: useradd then finds /etc/passwd locked.
  for (let attempt = 0; ; attempt++) {
    try {
      await run("useradd", [
        "--no-create-home",
        "--home-dir",
        "/nonexistent",
        "--shell",
        "/bin/bash",
        "--user-group",
        name,
      ]);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT")
        throw new Error("useradd is missing: install the Debian package passwd");
      const text = String((error as { stderr?: string }).stderr ?? (error as Error).message);
      if (/already exists/.test(text)) break; // created by another test process meanwhile
      if (!/lock/i.test(text) || attempt >= 150) throw new Error(`useradd ${name} failed: ${text}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  return lookup(name);
}

async function lookup(name: string): Promise<TestUser> {
  const { stdout } = await run("getent", ["passwd", name]);
  const fields = stdout.trim().split(":");
  const uid = Number(fields[2]);
  const gid = Number(fields[3]);
  if (!Number.isInteger(uid) || !Number.isInteger(gid))
    throw new Error(`getent passwd ${name}: unexpected "${stdout.trim()}"`);
  return { name, uid, gid };
}
