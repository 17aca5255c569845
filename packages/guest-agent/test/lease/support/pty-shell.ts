// A real interactive bash in a pseudo-terminal (node-pty), running as a
// normal user, whose tty belongs to that user the way login/sshd leave it.
// Commands are framed by markers so their output and exit code can be read
// back from the screen.
import { chown, chmod } from "node:fs/promises";
import * as pty from "node-pty";
import type { TestUser } from "./users.js";

export interface ShellResult {
  output: string;
  exitCode: number;
}

export class PtyShell {
  private screen = "";
  private counter = 0;
  private exited = false;

  private constructor(
    private readonly terminal: pty.IPty,
    readonly user: TestUser,
    /** "/dev/pts/N" */
    readonly device: string,
  ) {
    terminal.onData((data) => {
      this.screen += data;
    });
    terminal.onExit(() => {
      this.exited = true;
    });
  }

  /** Relative to /dev: "pts/N". */
  get tty(): string {
    return this.device.replace(/^\/dev\//, "");
  }

  static async start(user: TestUser, env: Record<string, string>): Promise<PtyShell> {
    const terminal = pty.spawn(
      "/usr/bin/setpriv",
      [`--reuid=${user.uid}`, `--regid=${user.gid}`, "--init-groups", "/bin/bash", "--norc", "--noprofile", "-i"],
      {
        name: "xterm",
        cols: 200,
        rows: 50,
        cwd: "/tmp",
        env: { TERM: "xterm", HOME: "/tmp", USER: user.name, LOGNAME: user.name, PS1: "$ ", ...env },
      },
    );
    const device = (terminal as unknown as { ptsName?: string }).ptsName;
    if (!device?.startsWith("/dev/pts/")) {
      terminal.kill();
      throw new Error(`node-pty did not report the pseudo-terminal's name (got ${String(device)})`);
    }
    // What login and sshd do: the session's terminal belongs to its user.
    await chown(device, user.uid, user.gid);
    await chmod(device, 0o620);
    const shell = new PtyShell(terminal, user, device);
    await shell.run("true");
    return shell;
  }

  get text(): string {
    return this.screen;
  }

  /** Types a command line and waits for it to finish; returns what it printed and its exit code. */
  async run(command: string, timeoutMs = 60_000): Promise<ShellResult> {
    const n = ++this.counter;
    const start = new RegExp(`__S${n}__\\r?\\n`);
    const end = new RegExp(`__E${n}__:(\\d+)`);
    const from = this.screen.length;
    this.terminal.write(`printf '__S${n}__\\n'; ${command}; printf '__E${n}__:%s\\n' $?\r`);
    await this.waitFor(() => end.test(this.screen.slice(from)), timeoutMs, `"${command}" to finish`);
    const tail = this.screen.slice(from);
    const startMatch = start.exec(tail);
    const endMatch = end.exec(tail)!;
    const output = tail
      .slice(startMatch ? startMatch.index + startMatch[0].length : 0, endMatch.index)
      .replace(/\r\n/g, "\n");
    return { output, exitCode: Number(endMatch[1]) };
  }

  /** Polls the screen until `predicate` holds. */
  async waitFor(predicate: (screen: string) => boolean, timeoutMs: number, what: string): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(this.screen)) {
      if (this.exited)
        throw new Error(`the shell exited while waiting for ${what}; screen:\n${this.screen.slice(-2000)}`);
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; screen:\n${this.screen.slice(-2000)}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  /** Stops reading the terminal: its buffer fills, as with a frozen ssh connection. */
  freeze(): void {
    this.terminal.pause();
  }

  close(): void {
    if (!this.exited) this.terminal.kill("SIGKILL");
  }
}
