// `ws-collector ssh-proxy`: an OpenSSH ProxyCommand that brings a stopped workstation back when a
// person asks (docs/coming-back.md). It proves who asks with the VM's start link (read from a
// file: a link in argv would show in `ps`), the same credential the stop message gave the
// owner, bound to that one VM. With the person's terminal (/dev/tty) it says the VM is stopped,
// starts it, prints each stage, waits until the guest's sshd answers with its banner and then
// carries the connection on stdin/stdout. Without a terminal (an IDE reconnecting by itself, a
// cron job) it never wakes the VM: it says where the start link is and fails. stdout carries
// only the SSH stream; everything for people goes to the terminal or stderr.
import { closeSync, openSync, readFileSync, writeSync } from "node:fs";
import net from "node:net";
import { DurationError, errorMessage, parseDuration, UsageError, type Io, parseCommandLine } from "@ws/protocol";
import type { StartJson } from "../start/handler.js";
import { progressLines } from "./lines.js";

export const SSH_PROXY_HELP = `Usage: ws-collector ssh-proxy --link-file FILE HOST PORT

An OpenSSH ProxyCommand that starts a stopped workstation when a person at a terminal connects:

  Host alice-gpu
    HostName alice-gpu.ws.example.com
    ProxyCommand ws-collector ssh-proxy --link-file ~/.config/ws/alice-gpu.link %h %p

FILE holds the VM's start link (from the stop message or the VM's page). Without a terminal
(an IDE reconnecting on its own) a stopped VM is not started: the link is printed instead.

Options:
      --link-file FILE   The start link (WS_START_LINK_FILE)
      --wait DURATION    Give up after this long (default 15m)
      --poll DURATION    How often to ask the collector (default 2s)
  -h, --help             This help
`;

export interface SshProxyDeps {
  /** The person's terminal, or undefined when there is none (no controlling tty). */
  openTerminal(): { write(line: string): void; close(): void } | undefined;
  fetch: typeof fetch;
  /** Carries the connection: resolves with the exit code when either side closes. */
  carry(host: string, port: number): Promise<number>;
  /** True once something at host:port sends an SSH banner. */
  sshAnswers(host: string, port: number, timeoutMs: number): Promise<boolean>;
  sleep(ms: number): Promise<void>;
  nowMs(): number;
}

export async function sshProxyCommand(argv: string[], io: Io, deps: SshProxyDeps = realDeps(io)): Promise<number> {
  const { values, positionals } = parseCommandLine(argv, {
    help: SSH_PROXY_HELP,
    options: {
      "link-file": { type: "string" },
      wait: { type: "string" },
      poll: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    allowPositionals: true,
  });
  if (values.help) {
    io.stdout.write(SSH_PROXY_HELP);
    return 0;
  }
  if (positionals.length !== 2) throw new UsageError("ssh-proxy needs HOST and PORT (ProxyCommand … %h %p)");
  const [host, portText] = positionals as [string, string];
  const port = Number(portText);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new UsageError(`ssh-proxy: bad port ${portText}`);
  const linkFile = values["link-file"] ?? io.env.WS_START_LINK_FILE;
  if (!linkFile) throw new UsageError("ssh-proxy needs --link-file FILE (the VM's start link)");
  const seconds = (text: string | undefined, fallback: number, name: string) => {
    try {
      return text === undefined ? fallback : parseDuration(text, { allowBareSeconds: true });
    } catch (error) {
      throw new UsageError(`--${name}: ${error instanceof DurationError ? error.message : String(error)}`);
    }
  };
  const waitMs = seconds(values.wait, 15 * 60, "wait") * 1000;
  const pollMs = seconds(values.poll, 2, "poll") * 1000;
  let link: URL;
  try {
    link = new URL(readFileSync(linkFile, "utf8").trim());
  } catch (error) {
    io.stderr.write(`ws: cannot read the start link from ${linkFile}: ${errorMessage(error).split("\n")[0]}\n`);
    return 1;
  }
  const shown = `${link.origin}${link.pathname}?t=…`;

  const ask = async (method: "GET" | "POST"): Promise<StartJson | { error: string }> => {
    const response = await deps.fetch(link, {
      method,
      headers: {
        accept: "application/json",
        ...(method === "POST" ? { "content-type": "application/x-www-form-urlencoded" } : {}),
      },
      ...(method === "POST" ? { body: `t=${encodeURIComponent(link.searchParams.get("t") ?? "")}&via=ssh` } : {}),
      signal: AbortSignal.timeout(15_000),
    });
    return (await response.json()) as StartJson | { error: string };
  };

  let state: StartJson | { error: string };
  try {
    state = await ask("GET");
  } catch (error) {
    // ws down must not lock anyone out of a running VM.
    io.stderr.write(
      `ws: the collector at ${link.origin} does not answer (${errorMessage(error)}); connecting directly\n`,
    );
    return deps.carry(host, port);
  }
  if ("error" in state) {
    io.stderr.write(
      `ws: the start link was refused (${state.error}): get a new one from the VM's page or the last stop message\n`,
    );
    return 1;
  }
  const vm = `${state.vm.namespace}/${state.vm.name}`;
  if (state.status === "ready") return deps.carry(host, port);

  const terminal = deps.openTerminal();
  const say = (line: string) => (terminal ? terminal.write(`${line}\r\n`) : io.stderr.write(`${line}\n`));
  try {
    if (state.status === "stopped" || state.status === "failed") {
      if (!terminal) {
        io.stderr.write(
          `ws: ${vm} is stopped. It is not started without a person at a terminal (an IDE reconnecting by itself must not wake it).\nws: start it with its start link: ${link.href}\n`,
        );
        return 1;
      }
      say(`ws: ${vm} is stopped; starting it (${shown}). Ctrl-C gives up, the start goes on.`);
      state = await ask("POST");
      if ("error" in state) {
        say(`ws: the start was refused: ${state.error}`);
        return 1;
      }
    } else {
      say(`ws: ${vm} is starting; waiting for it.`);
    }
    const deadline = deps.nowMs() + waitMs;
    let previous: StartJson | undefined;
    for (;;) {
      for (const line of progressLines(previous, state)) say(line);
      previous = state;
      if (state.status === "failed") return 1;
      const running = state.stages.find((s) => s.name === "running")?.state === "done";
      if (running && (await deps.sshAnswers(host, port, 3000))) {
        say(`ws: ✓ sshd answers at ${host}:${port}; connecting`);
        break;
      }
      if (deps.nowMs() > deadline) {
        say(`ws: ${vm} did not come up within ${Math.round(waitMs / 60_000)}m; its page: ${shown}`);
        return 1;
      }
      await deps.sleep(pollMs);
      try {
        const next = await ask("GET");
        if (!("error" in next)) state = next;
      } catch {
        // A collector restart or a leader change: ask again at the next poll.
      }
    }
  } finally {
    terminal?.close();
  }
  return deps.carry(host, port);
}

function realDeps(io: Io): SshProxyDeps {
  return {
    openTerminal() {
      let fd: number;
      try {
        fd = openSync("/dev/tty", "w");
      } catch {
        return undefined; // ENXIO: no controlling terminal
      }
      return { write: (line) => void writeSync(fd, line), close: () => closeSync(fd) };
    },
    fetch: (...args) => fetch(...args),
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    nowMs: () => Date.now(),
    sshAnswers: (host, port, timeoutMs) =>
      new Promise((resolve) => {
        const socket = net.connect({ host, port });
        let banner = "";
        const done = (answer: boolean) => {
          socket.destroy();
          resolve(answer);
        };
        socket.setTimeout(timeoutMs, () => done(false));
        socket.on("data", (chunk: Buffer) => {
          banner += chunk.toString("latin1");
          if (banner.includes("\n")) done(banner.startsWith("SSH-"));
        });
        socket.on("error", () => done(false));
        socket.on("close", () => done(banner.startsWith("SSH-")));
      }),
    carry: (host, port) =>
      new Promise((resolve) => {
        const socket = net.connect({ host, port });
        socket.on("error", (error) => {
          io.stderr.write(`ws: ${host}:${port}: ${error.message}\n`);
          resolve(1);
        });
        process.stdin.pipe(socket);
        socket.pipe(process.stdout);
        socket.on("close", () => resolve(0));
      }),
  };
}
