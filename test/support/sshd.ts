/**
 * A real OpenSSH server (Debian's openssh-server) on a loopback port, for tests.
 *
 * - Host and client keys are generated into a temporary directory; authorized keys live there
 *   too (AuthorizedKeysFile …/%u), so users' homes are never touched and concurrent servers
 *   do not see each other's keys.
 * - Test users (wstest1, wstest2, …) are created with useradd when missing and left on the
 *   machine; their password field is set to "*" because sshd without PAM refuses accounts
 *   locked with "!" (useradd's default), even for key logins.
 * - sshd writes a utmp record only into an existing /run/utmp: systemd-tmpfiles creates it on
 *   a real machine, prepareSshdRuntime() does it here (root:utmp 0664), with /run/sshd for
 *   privilege separation.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, chown, mkdir, mkdtemp, open, readFile, rm, writeFile } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";

const execFileAsync = promisify(execFile);

export const SSHD = "/usr/sbin/sshd";
export const SSH = "/usr/bin/ssh";
export const SSH_KEYGEN = "/usr/bin/ssh-keygen";
export const UTMP_PATH = "/run/utmp";

export interface SshdOptions {
  /** Accounts allowed to log in with the generated client key; created when missing. */
  users: string[];
  readyTimeoutMs?: number;
}

export interface RunningSshd {
  host: "127.0.0.1";
  port: number;
  pid: number;
  /** Private key accepted for every user in options.users. */
  clientKey: string;
  knownHosts: string;
  /** sshd's log so far (LogLevel VERBOSE, on stderr). */
  log(): string;
  /** argv (without the program) for `ssh -tt` into this server as `user`, remote command optional. */
  sshArgs(user: string, remoteCommand?: string[]): string[];
  /** argv for a session without a pty (`ssh -T`, what IDEs open); `options` are extra -o settings. */
  sshNoTtyArgs(user: string, remoteCommand: string[], options?: string[]): string[];
  /** Stops the daemon but keeps its keys and port (a guest shut down); `resume()` brings it back. */
  pause(): Promise<void>;
  /** Starts the daemon again on the same port with the same keys (the guest booted). */
  resume(): Promise<void>;
  /** argv for `sftp` into this server as `user` (batch commands from stdin). */
  sftpArgs(user: string): string[];
  stop(): Promise<void>;
}

export async function startSshd(options: SshdOptions): Promise<RunningSshd> {
  await assertOpenSshInstalled();
  await prepareSshdRuntime();
  for (const user of options.users) await ensureTestUser(user);

  const dir = await mkdtemp(path.join(os.tmpdir(), "ws-sshd-"));
  // Users read their authorized_keys file with their own rights: the path must be traversable.
  await chmod(dir, 0o755);
  try {
    const hostKey = path.join(dir, "ssh_host_ed25519_key");
    const clientKey = path.join(dir, "client_ed25519");
    await execFileAsync(SSH_KEYGEN, ["-q", "-t", "ed25519", "-N", "", "-C", "ws-test-host", "-f", hostKey]);
    await execFileAsync(SSH_KEYGEN, ["-q", "-t", "ed25519", "-N", "", "-C", "ws-test-client", "-f", clientKey]);
    const authorizedDir = path.join(dir, "authorized_keys");
    await mkdir(authorizedDir, { mode: 0o755 });
    const clientPublic = await readFile(`${clientKey}.pub`, "utf8");
    for (const user of options.users) {
      await writeFile(path.join(authorizedDir, user), clientPublic, { mode: 0o644 });
    }
    const configFile = path.join(dir, "sshd_config");
    await writeFile(
      configFile,
      [
        `HostKey ${hostKey}`,
        `PidFile ${path.join(dir, "sshd.pid")}`,
        `AuthorizedKeysFile ${authorizedDir}/%u`,
        `AllowUsers ${options.users.join(" ")}`,
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin no",
        // Without PAM (its Debian stack wants logind and loginuid, absent in test sandboxes).
        "UsePAM no",
        // /tmp is world-writable: StrictModes would reject any key file below it.
        "StrictModes no",
        "PrintMotd no",
        "PrintLastLog no",
        "UseDNS no",
        "LogLevel VERBOSE",
        // sftp as Debian configures it: its own process under the session (remote-sessions tests).
        "Subsystem sftp /usr/lib/openssh/sftp-server",
        "",
      ].join("\n"),
    );

    const hostPublic = (await readFile(`${hostKey}.pub`, "utf8")).trim().split(/\s+/).slice(0, 2).join(" ");
    const knownHosts = path.join(dir, "known_hosts");
    const timeoutMs = options.readyTimeoutMs ?? 30_000;

    // A free port can be taken between probing and binding: try a few.
    let lastLog = "";
    for (let attempt = 0; attempt < 5; attempt++) {
      const port = await freeLoopbackPort();
      await writeFile(knownHosts, `[127.0.0.1]:${port} ${hostPublic}\n`);
      const started = await launch(configFile, port, timeoutMs);
      if ("child" in started) {
        return running(started.child, started.log, port, dir, clientKey, knownHosts, () =>
          launch(configFile, port, timeoutMs),
        );
      }
      lastLog = started.log;
      if (!/Address already in use|Cannot bind any address/i.test(lastLog)) break;
    }
    throw new Error(`sshd did not start:\n${lastLog}`);
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}

async function launch(
  configFile: string,
  port: number,
  timeoutMs: number,
): Promise<{ child: ChildProcess; log: () => string } | { log: string }> {
  const child = spawn(SSHD, ["-D", "-e", "-f", configFile, "-p", String(port), "-o", "ListenAddress=127.0.0.1"], {
    stdio: ["ignore", "ignore", "pipe"],
    env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", LANG: "C.UTF-8" },
  });
  let log = "";
  child.stderr!.setEncoding("utf8");
  child.stderr!.on("data", (chunk: string) => (log += chunk));
  let exitCode: number | null | undefined;
  child.on("exit", (code, signal) => (exitCode = code ?? (signal ? -1 : null)));
  child.on("error", (error) => {
    log += `\nspawn ${SSHD}: ${error.message}`;
    exitCode = -1;
  });

  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (new RegExp(`Server listening on 127\\.0\\.0\\.1 port ${port}`).test(log)) {
      return { child, log: () => log };
    }
    if (exitCode !== undefined) return { log: `sshd exited (${exitCode}):\n${log}` };
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      return { log: `sshd was not listening after ${timeoutMs} ms:\n${log}` };
    }
    await delay(50);
  }
}

function running(
  child: ChildProcess,
  log: () => string,
  port: number,
  dir: string,
  clientKey: string,
  knownHosts: string,
  relaunch: () => ReturnType<typeof launch>,
): RunningSshd {
  const exitOf = (process: ChildProcess) =>
    new Promise<void>((resolve) => {
      if (process.exitCode !== null || process.signalCode !== null) resolve();
      else process.once("exit", () => resolve());
    });
  let exited = exitOf(child);
  const halt = async () => {
    child.kill("SIGTERM");
    await Promise.race([exited, delay(5_000)]);
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGKILL");
      await Promise.race([exited, delay(5_000)]);
    }
  };
  return {
    host: "127.0.0.1",
    port,
    pid: child.pid!,
    clientKey,
    knownHosts,
    log,
    sshNoTtyArgs(user, remoteCommand, options = []) {
      return [
        "-F",
        "/dev/null",
        "-T",
        ...options.flatMap((option) => ["-o", option]),
        "-p",
        String(port),
        ...clientOptions(clientKey, knownHosts),
        `${user}@127.0.0.1`,
        ...remoteCommand,
      ];
    },
    sftpArgs(user) {
      // sftp spells the port -P.
      return [
        "-F",
        "/dev/null",
        "-b",
        "-",
        "-P",
        String(port),
        ...clientOptions(clientKey, knownHosts),
        `${user}@127.0.0.1`,
      ];
    },
    sshArgs(user, remoteCommand = []) {
      return [
        "-F",
        "/dev/null",
        "-tt",
        "-p",
        String(port),
        ...clientOptions(clientKey, knownHosts),
        `${user}@127.0.0.1`,
        ...remoteCommand,
      ];
    },
    pause: halt,
    async resume() {
      const started = await relaunch();
      if (!("child" in started)) throw new Error(`sshd did not start again:\n${started.log}`);
      child = started.child;
      exited = exitOf(child);
    },
    async stop() {
      // The listener only: sessions still open keep their own sshd processes until the client
      // side closes, as on a real server.
      await halt();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** What every client (ssh, sftp) of the test server is given: its key, its host key, no prompts. */
function clientOptions(clientKey: string, knownHosts: string): string[] {
  return [
    "-i",
    clientKey,
    "-o",
    "IdentitiesOnly=yes",
    "-o",
    "BatchMode=yes",
    "-o",
    "StrictHostKeyChecking=yes",
    "-o",
    `UserKnownHostsFile=${knownHosts}`,
    "-o",
    "LogLevel=ERROR",
  ];
}

async function assertOpenSshInstalled(): Promise<void> {
  if (!existsSync(SSHD)) throw new Error(`${SSHD} is missing: install the Debian package openssh-server`);
  for (const binary of [SSH, SSH_KEYGEN]) {
    if (!existsSync(binary)) throw new Error(`${binary} is missing: install the Debian package openssh-client`);
  }
  for (const [binary, pkg] of [
    ["/usr/sbin/useradd", "passwd"],
    ["/usr/sbin/usermod", "passwd"],
  ] as const) {
    if (!existsSync(binary)) throw new Error(`${binary} is missing: install the Debian package ${pkg}`);
  }
}

/** /run/sshd (privilege separation) and /run/utmp (else sshd records no login), as on a booted system. */
export async function prepareSshdRuntime(): Promise<void> {
  await mkdir("/run/sshd", { recursive: true, mode: 0o755 });
  let handle;
  try {
    // "wx": create only; an existing utmp holds other sessions and must be left as it is.
    handle = await open(UTMP_PATH, "wx", 0o664);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return;
    throw error;
  }
  await handle.close();
  const utmpGid = await groupId("utmp");
  await chown(UTMP_PATH, 0, utmpGid ?? 0);
  await chmod(UTMP_PATH, 0o664);
}

async function groupId(name: string): Promise<number | undefined> {
  const text = await readFile("/etc/group", "utf8").catch(() => "");
  for (const line of text.split("\n")) {
    const [group, , gid] = line.split(":");
    if (group === name && gid !== undefined && /^\d+$/.test(gid)) return Number(gid);
  }
  return undefined;
}

/**
 * Creates `name` with a home and bash when missing; idempotent and safe when two test files
 * race for the same account (useradd then fails with "exists" or a busy /etc/passwd lock).
 */
export async function ensureTestUser(name: string): Promise<{ uid: number; gid: number; home: string }> {
  if (!/^wstest[0-9a-z_-]*$/.test(name)) throw new Error(`refusing to create non-test account ${JSON.stringify(name)}`);
  for (let attempt = 0; ; attempt++) {
    const existing = await lookupUser(name);
    if (existing) {
      await unlockForKeyLogin(name);
      return existing;
    }
    try {
      await execFileAsync("/usr/sbin/useradd", ["--create-home", "--shell", "/bin/bash", name]);
    } catch (error) {
      if (attempt >= 10) throw new Error(`useradd ${name} failed: ${(error as Error).message}`);
      await delay(200 + attempt * 100);
    }
  }
}

async function lookupUser(name: string): Promise<{ uid: number; gid: number; home: string } | undefined> {
  try {
    const { stdout } = await execFileAsync("getent", ["passwd", name]);
    const fields = stdout.trim().split(":");
    return { uid: Number(fields[2]), gid: Number(fields[3]), home: fields[5] ?? "" };
  } catch {
    return undefined;
  }
}

async function unlockForKeyLogin(name: string): Promise<void> {
  const shadow = await readFile("/etc/shadow", "utf8").catch(() => "");
  const entry = shadow.split("\n").find((line) => line.startsWith(`${name}:`));
  const password = entry?.split(":")[1] ?? "";
  if (!password.startsWith("!")) return;
  for (let attempt = 0; ; attempt++) {
    try {
      // "*": no password can match, but the account is not "locked" in sshd's eyes.
      await execFileAsync("/usr/sbin/usermod", ["--password", "*", name]);
      return;
    } catch (error) {
      if (attempt >= 10) throw new Error(`usermod --password '*' ${name} failed: ${(error as Error).message}`);
      await delay(200 + attempt * 100);
    }
  }
}

export async function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
