// `ws-collector ssh-proxy`: an OpenSSH ProxyCommand that brings a stopped workstation back when a
// person asks (docs/coming-back.md). It proves who asks with the VM's start link (read from a
// file: a link in argv would show in `ps`), the same credential the stop message gave the
// owner, bound to that one VM. With the person's terminal (/dev/tty) it says the VM is stopped,
// starts it, prints each stage, waits until the guest's sshd answers with its banner and then
// carries the connection on stdin/stdout. Without a terminal (an IDE reconnecting by itself, a
// cron job) it never wakes the VM: it says where the start link is and fails. Whatever else
// answers at the link's address (a login in front of /start/, a gateway's error page, nothing)
// is named in one line and the connection goes straight to the VM (answer.ts): ws never locks
// anyone out of a running VM. stdout carries only the SSH stream; everything for people goes to
// the terminal or stderr.
import { closeSync, openSync, readFileSync, writeSync } from "node:fs";
import net from "node:net";
import {
  DurationError,
  errorMessage,
  parseDuration,
  UsageError,
  type Io,
  parseCommandLine,
  terminalText,
} from "@ws/protocol";
import type { StartJson } from "../start/handler.js";
import { type CollectorAnswer, classifyAnswer, MAX_ANSWER_BYTES } from "./answer.js";
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

interface ProxyOptions {
  host: string;
  port: number;
  linkFile: string;
  waitMs: number;
  pollMs: number;
}

export async function sshProxyCommand(argv: string[], io: Io, deps: SshProxyDeps = realDeps(io)): Promise<number> {
  const options = parseProxyArgs(argv, io.env);
  if (options === "help") {
    io.stdout.write(SSH_PROXY_HELP);
    return 0;
  }
  let link: URL;
  try {
    link = new URL(readFileSync(options.linkFile, "utf8").trim());
  } catch (error) {
    io.stderr.write(`ws: cannot read the start link from ${options.linkFile}: ${errorMessage(error).split("\n")[0]}\n`);
    return 1;
  }
  const collector = new StartLinkClient(link, deps.fetch);
  const first = await collector.ask("GET");
  const { host, port } = options;
  if (first.kind !== "progress") {
    // Whatever stands in the way, ws must not lock anyone out of a running VM.
    io.stderr.write(`ws: ${directMessage(first, link.origin)}; connecting directly\n`);
    return deps.carry(host, port);
  }
  if (first.state.status === "ready") return deps.carry(host, port);
  const terminal = deps.openTerminal();
  // Everything printed is one line without control characters, whatever the answer held.
  const say = (line: string) =>
    terminal ? terminal.write(`${terminalText(line, 1000)}\r\n`) : io.stderr.write(`${terminalText(line, 1000)}\n`);
  try {
    const started = await startIfStopped(first.state, collector, terminal !== undefined, say, link);
    if (typeof started === "number") return started;
    const up = await waitForSshd(started, collector, deps, options, say);
    if (up !== 0) return up;
  } finally {
    terminal?.close();
  }
  return deps.carry(host, port);
}

/** The command line: the options, or "help". Throws UsageError. */
function parseProxyArgs(argv: string[], env: Io["env"]): ProxyOptions | "help" {
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
  if (values.help) return "help";
  if (positionals.length !== 2) throw new UsageError("ssh-proxy needs HOST and PORT (ProxyCommand … %h %p)");
  const [host, portText] = positionals as [string, string];
  const port = Number(portText);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new UsageError(`ssh-proxy: bad port ${portText}`);
  const linkFile = values["link-file"] ?? env.WS_START_LINK_FILE;
  if (!linkFile) throw new UsageError("ssh-proxy needs --link-file FILE (the VM's start link)");
  const seconds = (text: string | undefined, fallback: number, name: string) => {
    try {
      return text === undefined ? fallback : parseDuration(text, { allowBareSeconds: true });
    } catch (error) {
      throw new UsageError(`--${name}: ${error instanceof DurationError ? error.message : String(error)}`);
    }
  };
  return {
    host,
    port,
    linkFile,
    waitMs: seconds(values.wait, 15 * 60, "wait") * 1000,
    pollMs: seconds(values.poll, 2, "poll") * 1000,
  };
}

/** Why the helper connects without ws, for the person (stderr). */
function directMessage(answer: Exclude<CollectorAnswer, { kind: "progress" }>, origin: string): string {
  if (answer.kind === "silent") return `the collector at ${origin} does not answer (${answer.message})`;
  if (answer.kind === "refused")
    return `the start link was refused (${answer.message}): get a new one from the VM's page or the last stop message`;
  return answer.message;
}

/**
 * A stopped (or failed) VM is started when a person is at the terminal; without one it is not
 * (an IDE reconnecting by itself must not wake it). The progress to wait on, or the exit code.
 */
async function startIfStopped(
  state: StartJson,
  collector: StartLinkClient,
  atTerminal: boolean,
  say: (line: string) => void,
  link: URL,
): Promise<StartJson | number> {
  const vm = `${state.vm.namespace}/${state.vm.name}`;
  if (state.status !== "stopped" && state.status !== "failed") {
    say(`ws: ${vm} is starting; waiting for it.`);
    return state;
  }
  if (!atTerminal) {
    say(
      `ws: ${vm} is stopped. It is not started without a person at a terminal (an IDE reconnecting by itself must not wake it).`,
    );
    say(`ws: start it with its start link: ${link.href}`);
    return 1;
  }
  // No link on the terminal: the token is not echoed, and the person has it in the link file.
  say(`ws: ${vm} is stopped; starting it (Ctrl-C gives up, the start goes on)`);
  const answer = await collector.ask("POST");
  if (answer.kind === "progress") return answer.state;
  say(`ws: the start was not accepted: ${directMessage(answer, link.origin)}`);
  return 1;
}

/** Prints each stage until the VMI runs and the guest's sshd sends its banner: 0, or the exit code. */
async function waitForSshd(
  first: StartJson,
  collector: StartLinkClient,
  deps: SshProxyDeps,
  options: ProxyOptions,
  say: (line: string) => void,
): Promise<number> {
  const { host, port, waitMs, pollMs } = options;
  const deadline = deps.nowMs() + waitMs;
  let state = first;
  let previous: StartJson | undefined;
  for (;;) {
    for (const line of progressLines(previous, state)) say(line);
    previous = state;
    if (state.status === "failed") return 1;
    const running = state.stages.find((s) => s.name === "running")?.state === "done";
    if (running && (await deps.sshAnswers(host, port, 3000))) {
      say(`ws: ✓ sshd answers at ${host}:${port}; connecting`);
      return 0;
    }
    if (deps.nowMs() > deadline) {
      say(
        `ws: ${state.vm.namespace}/${state.vm.name} did not come up within ${Math.round(waitMs / 60_000)}m; its page is the start link in ${options.linkFile}`,
      );
      return 1;
    }
    await deps.sleep(pollMs);
    // A collector restart or a leader change answers nothing useful for a moment: ask again at the next poll.
    const next = await collector.ask("GET");
    if (next.kind === "progress") state = next.state;
  }
}

/** The start link's JSON API, every answer classified (never throws). */
class StartLinkClient {
  constructor(
    private readonly link: URL,
    private readonly fetcher: typeof fetch,
  ) {}

  async ask(method: "GET" | "POST"): Promise<CollectorAnswer> {
    const where = `${this.link.origin}${this.link.pathname}`;
    try {
      const response = await this.fetcher(this.link, {
        method,
        // A redirect is an answer to classify (a login in front of /start/), not a place to follow.
        redirect: "manual",
        headers: {
          accept: "application/json",
          ...(method === "POST" ? { "content-type": "application/x-www-form-urlencoded" } : {}),
        },
        ...(method === "POST"
          ? { body: `t=${encodeURIComponent(this.link.searchParams.get("t") ?? "")}&via=ssh` }
          : {}),
        signal: AbortSignal.timeout(15_000),
      });
      return classifyAnswer(
        {
          status: response.status,
          contentType: response.headers.get("content-type") ?? "",
          location: response.headers.get("location"),
          body: await readCapped(response),
        },
        where,
      );
    } catch (error) {
      // The one answer fetch hides behind a network error is a 407: judged as the answer it is.
      if (answeredUnreadably(error))
        return classifyAnswer({ status: 407, contentType: "", location: null, body: new Uint8Array() }, where);
      return { kind: "silent", message: terminalText(errorMessage(error), 300) };
    }
  }
}

/** The body's first MAX_ANSWER_BYTES; the rest is not read (ws's answer is far smaller). */
async function readCapped(response: Response): Promise<Uint8Array> {
  if (!response.body) return new Uint8Array();
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  while (size < MAX_ANSWER_BYTES) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    size += value.byteLength;
  }
  await reader.cancel().catch(() => {});
  return Buffer.concat(chunks).subarray(0, MAX_ANSWER_BYTES);
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

/**
 * Whether fetch failed on an answer rather than on the way to one: the Fetch standard turns a 407
 * from a server that is not the proxy into a network error, whose cause carries no system error
 * code; failing to connect, a reset or a bad answer's parse error each carry one (ECONNREFUSED,
 * UND_ERR_SOCKET, HPE_…), and a timeout is not a TypeError.
 */
function answeredUnreadably(error: unknown): boolean {
  if (!(error instanceof TypeError)) return false;
  const cause: unknown = error.cause;
  return cause instanceof Error && (cause as { code?: unknown }).code === undefined;
}
