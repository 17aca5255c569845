/**
 * Starts a real Jupyter Server (Debian's jupyter-server + python3-ipykernel) for tests, and
 * drives its kernels the way a browser does: REST for lifecycle, the kernel websocket for code.
 *
 * Debian's Jupyter lives under /usr/bin/python3; the python3 first on PATH may be another
 * interpreter without those modules, so it is never used.
 */
import { spawn, execFile } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { chown, mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import http from "node:http";
import https from "node:https";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import type { Duplex } from "node:stream";

export const JUPYTER_PYTHON = "/usr/bin/python3";
const DEBIAN_PACKAGES = "jupyter-server python3-ipykernel";

export interface JupyterServerOptions {
  /** Where the server writes jpserver-PID.json (the tests point it into a fake home tree). */
  runtimeDir: string;
  /** JupyterHub single-user servers live under a prefix such as /user/alice/. */
  baseUrl?: string;
  /** PEM files for HTTPS (see selfSignedCertificate()). */
  certfile?: string;
  keyfile?: string;
  /** Listen on this unix socket instead of a TCP port (jupyter_server --sock). */
  sock?: string;
  readyTimeoutMs?: number;
  /** Run the server as this account (as a user's own server runs), not as the test's user. */
  runAs?: { uid: number; gid: number };
  /** The shell its terminals start (default /bin/sh). */
  shell?: string;
}

export interface RunningJupyter extends JupyterEndpoint {
  runtimeDir: string;
  runtimeFile: string;
  pid: number;
  /** The last few kB the server printed, for failure messages. */
  log(): string;
  /** Graceful stop: kernels and terminals are shut down, the runtime file is removed. */
  stop(): Promise<void>;
  /**
   * SIGKILL, as a crash or an OOM kill would: the runtime file is left behind (and so would be
   * any kernel or terminal it started: crash servers that have none).
   */
  crash(): Promise<void>;
}

export async function startJupyterServer(options: JupyterServerOptions): Promise<RunningJupyter> {
  await assertJupyterInstalled();
  const scratch = await mkdtemp(path.join(os.tmpdir(), "ws-jupyter-"));
  const rootDir = path.join(scratch, "notebooks");
  await mkdir(rootDir, { recursive: true });
  await mkdir(options.runtimeDir, { recursive: true });
  const token = randomBytes(16).toString("hex");
  const args = [
    "-m",
    "jupyter_server",
    "--no-browser",
    `--ServerApp.token=${token}`,
    `--ServerApp.root_dir=${rootDir}`,
    `--ServerApp.base_url=${options.baseUrl ?? "/"}`,
  ];
  if (options.certfile) args.push(`--ServerApp.certfile=${options.certfile}`);
  if (options.keyfile) args.push(`--ServerApp.keyfile=${options.keyfile}`);
  if (options.sock) {
    args.push(`--ServerApp.sock=${options.sock}`);
  } else {
    args.push(
      "--ServerApp.ip=127.0.0.1",
      `--ServerApp.port=${await freeLoopbackPort()}`,
      // Another test may take the port between probing and binding: Jupyter then tries the
      // next ones and the runtime file tells which it got.
      "--ServerApp.port_retries=50",
    );
  }
  if (process.getuid?.() === 0 && !options.runAs) args.push("--allow-root");
  if (options.runAs) {
    for (const dir of [scratch, rootDir, options.runtimeDir]) await chown(dir, options.runAs.uid, options.runAs.gid);
  }

  const child = spawn(JUPYTER_PYTHON, args, {
    cwd: rootDir,
    stdio: ["ignore", "pipe", "pipe"],
    ...(options.runAs ? { uid: options.runAs.uid, gid: options.runAs.gid } : {}),
    env: {
      PATH: "/usr/sbin:/usr/bin:/sbin:/bin",
      HOME: scratch,
      LANG: "C.UTF-8",
      JUPYTER_RUNTIME_DIR: options.runtimeDir,
      JUPYTER_CONFIG_DIR: path.join(scratch, "config"),
      JUPYTER_DATA_DIR: path.join(scratch, "data"),
      JUPYTER_PLATFORM_DIRS: "0",
      IPYTHONDIR: path.join(scratch, "ipython"),
      PYDEVD_DISABLE_FILE_VALIDATION: "1",
      SHELL: options.shell ?? "/bin/sh",
    },
  });
  let log = "";
  const keepLog = (chunk: Buffer) => {
    log = (log + chunk.toString()).slice(-8000);
  };
  child.stdout!.on("data", keepLog);
  child.stderr!.on("data", keepLog);
  const exited = new Promise<number | null>((resolve) => {
    child.once("exit", (code) => resolve(code));
    child.once("error", (error) => {
      keepLog(Buffer.from(`\nspawn ${JUPYTER_PYTHON}: ${error.message}\n`));
      resolve(null);
    });
  });
  let hasExited = false;
  void exited.then(() => (hasExited = true));

  const pid = child.pid!;
  const runtimeFile = path.join(options.runtimeDir, `jpserver-${pid}.json`);
  const cleanup = async () => {
    await rm(scratch, { recursive: true, force: true });
  };
  try {
    const deadline = Date.now() + (options.readyTimeoutMs ?? 90_000);
    let endpoint: JupyterEndpoint | undefined;
    for (;;) {
      if (hasExited) throw new Error(`jupyter_server exited before it was ready:\n${log}`);
      if (Date.now() > deadline) throw new Error(`jupyter_server was not ready in time:\n${log}`);
      const url = await runtimeFileUrl(runtimeFile);
      if (url !== undefined) {
        endpoint = options.sock
          ? { url: `http://localhost${options.baseUrl ?? "/"}`, token, socketPath: options.sock }
          : { url, token };
        if (await statusAnswers(endpoint)) break;
      }
      await delay(200);
    }
    return {
      ...endpoint,
      runtimeDir: options.runtimeDir,
      runtimeFile,
      pid,
      log: () => log,
      stop: async () => {
        if (!hasExited) {
          child.kill("SIGTERM");
          let timer: NodeJS.Timeout | undefined;
          const stopped = await Promise.race([
            exited.then(() => true),
            new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), 30_000))),
          ]);
          clearTimeout(timer);
          if (!stopped) {
            child.kill("SIGKILL");
            await exited;
          }
        }
        await cleanup();
      },
      crash: async () => {
        if (!hasExited) {
          child.kill("SIGKILL");
          await exited;
        }
        await cleanup();
      },
    };
  } catch (error) {
    child.kill("SIGKILL");
    await exited;
    await cleanup();
    throw error;
  }
}

async function assertJupyterInstalled(): Promise<void> {
  try {
    await execFileText(JUPYTER_PYTHON, ["-c", "import jupyter_server, ipykernel"]);
  } catch (error) {
    throw new Error(
      `Jupyter Server is not usable under ${JUPYTER_PYTHON} (${(error as Error).message.trim()}). ` +
        `Install the Debian packages: apt-get install ${DEBIAN_PACKAGES} (scripts/install-test-deps.sh).`,
    );
  }
}

async function runtimeFileUrl(file: string): Promise<string | undefined> {
  try {
    const info = JSON.parse(await readFile(file, "utf8")) as { url?: unknown };
    return typeof info.url === "string" ? info.url : undefined;
  } catch {
    return undefined; // not written yet, or half written
  }
}

async function statusAnswers(endpoint: JupyterEndpoint): Promise<boolean> {
  try {
    const reply = await jupyterRequest(endpoint, "GET", "api/status");
    return reply.status === 200;
  } catch {
    return false;
  }
}

export async function freeLoopbackPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

// --- REST -----------------------------------------------------------------------------------

export interface JupyterEndpoint {
  /** Base URL with a trailing slash and base_url included, no token. */
  url: string;
  token: string;
  /** Set for a server on a unix socket; url then only supplies the path. */
  socketPath?: string;
}

export interface JupyterReply {
  status: number;
  body: string;
}

/** One REST call; self-signed certificates are accepted (the test made them). */
export function jupyterRequest(
  server: JupyterEndpoint,
  method: string,
  apiPath: string,
  body?: unknown,
): Promise<JupyterReply> {
  const target = new URL(apiPath, server.url);
  const client = target.protocol === "https:" ? https : http;
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const request = client.request(
      target,
      {
        method,
        rejectUnauthorized: false,
        ...(server.socketPath === undefined ? {} : { socketPath: server.socketPath }),
        headers: {
          Authorization: `token ${server.token}`,
          ...(payload === undefined ? {} : { "Content-Type": "application/json" }),
        },
        timeout: 30_000,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on("data", (chunk: Buffer) => chunks.push(chunk));
        response.on("end", () =>
          resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }),
        );
        response.on("error", reject);
      },
    );
    request.on("timeout", () => request.destroy(new Error(`${method} ${target.href} timed out`)));
    request.on("error", reject);
    request.end(payload);
  });
}

async function jupyterJson<T>(server: JupyterEndpoint, method: string, apiPath: string, body?: unknown): Promise<T> {
  const reply = await jupyterRequest(server, method, apiPath, body);
  if (reply.status < 200 || reply.status >= 300) {
    throw new Error(`${method} ${apiPath}: HTTP ${reply.status} ${reply.body}`);
  }
  return (reply.body === "" ? undefined : JSON.parse(reply.body)) as T;
}

export interface KernelModel {
  id: string;
  name: string;
  execution_state: string;
  last_activity: string;
  connections: number;
}

export async function startKernel(server: JupyterEndpoint): Promise<KernelModel> {
  return jupyterJson<KernelModel>(server, "POST", "api/kernels", { name: "python3" });
}

export async function getKernel(server: JupyterEndpoint, id: string): Promise<KernelModel> {
  return jupyterJson<KernelModel>(server, "GET", `api/kernels/${id}`);
}

export async function interruptKernel(server: JupyterEndpoint, id: string): Promise<void> {
  await jupyterJson(server, "POST", `api/kernels/${id}/interrupt`);
}

export async function shutdownKernel(server: JupyterEndpoint, id: string): Promise<void> {
  await jupyterJson(server, "DELETE", `api/kernels/${id}`);
}

export async function startTerminal(server: JupyterEndpoint): Promise<{ name: string; last_activity?: string }> {
  const reply = await jupyterRequest(server, "POST", "api/terminals");
  if (reply.status === 404) {
    throw new Error(
      "POST /api/terminals answered 404: terminals are disabled; install the Debian package python3-terminado",
    );
  }
  if (reply.status !== 200) throw new Error(`POST api/terminals: HTTP ${reply.status} ${reply.body}`);
  return JSON.parse(reply.body) as { name: string; last_activity?: string };
}

export async function shutdownTerminal(server: JupyterEndpoint, name: string): Promise<void> {
  await jupyterJson(server, "DELETE", `api/terminals/${name}`);
}

/** A browser's terminal tab: terminado's JSON messages over /terminals/websocket/NAME. */
export interface TerminalSession {
  /** Keystrokes, as the browser sends them (["stdin", text]). */
  type(text: string): void;
  /** Everything the terminal printed so far. */
  output(): string;
  close(): void;
}

export async function connectTerminal(server: JupyterEndpoint, name: string): Promise<TerminalSession> {
  const socket = await openWebSocket(server, `terminals/websocket/${name}`);
  let printed = "";
  socket.onText = (text) => {
    const message = JSON.parse(text) as [string, unknown];
    if (message[0] === "stdout" && typeof message[1] === "string") printed = (printed + message[1]).slice(-64_000);
  };
  return {
    type: (text) => socket.sendText(JSON.stringify(["stdin", text])),
    output: () => printed,
    close: () => socket.close(),
  };
}

// --- Kernel websocket -----------------------------------------------------------------------

/**
 * A browser tab's connection to a kernel: /api/kernels/ID/channels, JSON messages as
 * JupyterLab sends them. execute() resolves with the execute_reply (after the code finished
 * or was interrupted).
 *
 * Jupyter Server 1.x tracks a kernel's execution_state from every IOPub status message, and
 * when a socket connects it "nudges" the kernel with kernel_info requests on shell and control
 * (every 0.5 s until answered). A control-channel answer that lands after a cell started says
 * "idle" and hides the busy kernel (jupyter_server#989); the server's IOPub watcher may also
 * join after a fresh kernel's first status messages. Tests therefore run a first cell and wait
 * for the server to report the kernel idle before the cell whose "busy" they want to see,
 * which is what a person in JupyterLab does too.
 */
export interface KernelSession {
  execute(code: string): Promise<{ status: string }>;
  /** "channel/msg_type" of every message seen on the socket, for failure messages. */
  received: string[];
  close(): void;
}

export async function connectKernel(server: JupyterEndpoint, kernelId: string): Promise<KernelSession> {
  const session = randomUUID();
  const socket = await openWebSocket(server, `api/kernels/${kernelId}/channels?session_id=${session}`);
  const received: string[] = [];
  const waiting = new Map<string, { resolve(reply: { status: string }): void; reject(error: Error): void }>();
  socket.onText = (text) => {
    const message = JSON.parse(text) as {
      channel?: string;
      msg_type?: string;
      parent_header?: { msg_id?: string };
      content?: { status?: string };
    };
    received.push(`${message.channel}/${message.msg_type}`);
    const parent = message.parent_header?.msg_id;
    if (message.msg_type === "execute_reply" && parent !== undefined) {
      waiting.get(parent)?.resolve({ status: message.content?.status ?? "unknown" });
      waiting.delete(parent);
    }
  };
  socket.onClose = (reason) => {
    for (const pending of waiting.values())
      pending.reject(new Error(`kernel websocket closed before the reply: ${reason}`));
    waiting.clear();
  };
  return {
    received,
    close: () => socket.close(),
    execute: (code) => {
      const msgId = randomUUID();
      const reply = new Promise<{ status: string }>((resolve, reject) => waiting.set(msgId, { resolve, reject }));
      socket.sendText(
        JSON.stringify({
          header: {
            msg_id: msgId,
            msg_type: "execute_request",
            username: "ws-test",
            session,
            date: new Date().toISOString(),
            version: "5.3",
          },
          parent_header: {},
          metadata: {},
          content: {
            code,
            silent: false,
            store_history: false,
            user_expressions: {},
            allow_stdin: false,
            stop_on_error: true,
          },
          channel: "shell",
          buffers: [],
        }),
      );
      return reply;
    },
  };
}

interface WebSocketClient {
  onText: (text: string) => void;
  onClose: (reason: string) => void;
  sendText(text: string): void;
  close(): void;
}

/** The client half of RFC 6455, just enough for JSON text messages: Node 20 has no WebSocket. */
function openWebSocket(server: JupyterEndpoint, apiPath: string): Promise<WebSocketClient> {
  const target = new URL(apiPath, server.url);
  const client = target.protocol === "https:" ? https : http;
  const key = randomBytes(16).toString("base64");
  return new Promise((resolve, reject) => {
    const request = client.request(target, {
      rejectUnauthorized: false,
      ...(server.socketPath === undefined ? {} : { socketPath: server.socketPath }),
      headers: {
        Connection: "Upgrade",
        Upgrade: "websocket",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": key,
        Authorization: `token ${server.token}`,
      },
    });
    request.on("response", (response) => {
      reject(new Error(`websocket upgrade refused: HTTP ${response.statusCode}`));
      response.resume();
    });
    request.on("error", reject);
    request.on("upgrade", (_response, socket: Duplex, head: Buffer) => {
      const ws: WebSocketClient = {
        onText: () => undefined,
        onClose: () => undefined,
        sendText: (text) => socket.write(maskedFrame(0x1, Buffer.from(text, "utf8"))),
        close: () => {
          socket.write(maskedFrame(0x8, Buffer.alloc(0)));
          socket.destroy();
        },
      };
      let pending = head;
      let fragments: Buffer[] = [];
      socket.on("data", (chunk: Buffer) => {
        pending = Buffer.concat([pending, chunk]);
        for (;;) {
          const frame = readFrame(pending);
          if (!frame) break;
          pending = pending.subarray(frame.length);
          if (frame.opcode === 0x8) {
            socket.destroy();
            return;
          }
          if (frame.opcode === 0x9) {
            socket.write(maskedFrame(0xa, frame.payload));
            continue;
          }
          if (frame.opcode === 0x1 || frame.opcode === 0x0) fragments.push(frame.payload);
          if (frame.opcode === 0x2) continue; // binary messages carry buffers; not needed here
          if (frame.fin && fragments.length > 0) {
            const text = Buffer.concat(fragments).toString("utf8");
            fragments = [];
            ws.onText(text);
          }
        }
      });
      socket.on("close", () => ws.onClose("socket closed"));
      socket.on("error", (error) => ws.onClose(error.message));
      resolve(ws);
    });
    request.end();
  });
}

function maskedFrame(opcode: number, payload: Buffer): Buffer {
  const mask = randomBytes(4);
  const length = payload.length;
  const header = length < 126 ? Buffer.alloc(2) : length < 65536 ? Buffer.alloc(4) : Buffer.alloc(10);
  header[0] = 0x80 | opcode;
  if (length < 126) {
    header[1] = 0x80 | length;
  } else if (length < 65536) {
    header[1] = 0x80 | 126;
    header.writeUInt16BE(length, 2);
  } else {
    header[1] = 0x80 | 127;
    header.writeBigUInt64BE(BigInt(length), 2);
  }
  const masked = Buffer.from(payload);
  for (let i = 0; i < masked.length; i++) masked[i]! ^= mask[i % 4]!;
  return Buffer.concat([header, mask, masked]);
}

function readFrame(buffer: Buffer): { fin: boolean; opcode: number; payload: Buffer; length: number } | undefined {
  if (buffer.length < 2) return undefined;
  const fin = (buffer[0]! & 0x80) !== 0;
  const opcode = buffer[0]! & 0x0f;
  const masked = (buffer[1]! & 0x80) !== 0;
  let length = buffer[1]! & 0x7f;
  let offset = 2;
  if (length === 126) {
    if (buffer.length < 4) return undefined;
    length = buffer.readUInt16BE(2);
    offset = 4;
  } else if (length === 127) {
    if (buffer.length < 10) return undefined;
    length = Number(buffer.readBigUInt64BE(2));
    offset = 10;
  }
  const maskOffset = offset;
  if (masked) offset += 4;
  if (buffer.length < offset + length) return undefined;
  const payload = Buffer.from(buffer.subarray(offset, offset + length));
  if (masked) for (let i = 0; i < payload.length; i++) payload[i]! ^= buffer[maskOffset + (i % 4)]!;
  return { fin, opcode, payload, length: offset + length };
}

// --- Helpers ---------------------------------------------------------------------------------

/** A throwaway self-signed certificate for 127.0.0.1, made by the openssl CLI. */
export async function selfSignedCertificate(dir: string): Promise<{ certfile: string; keyfile: string }> {
  const certfile = path.join(dir, "cert.pem");
  const keyfile = path.join(dir, "key.pem");
  try {
    await execFileText("openssl", [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-days",
      "2",
      "-subj",
      "/CN=127.0.0.1",
      "-keyout",
      keyfile,
      "-out",
      certfile,
    ]);
  } catch (error) {
    throw new Error(
      `could not make a self-signed certificate with openssl (${(error as Error).message.trim()}); ` +
        "install the Debian package openssl",
    );
  }
  return { certfile, keyfile };
}

/** Polls until check() returns a value (not undefined) or the deadline passes. */
export async function waitFor<T>(
  what: string | (() => string),
  check: () => Promise<T | undefined>,
  timeoutMs = 60_000,
  intervalMs = 200,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      const description = typeof what === "string" ? what : what();
      throw new Error(`timed out waiting for ${description}${lastError ? `: ${(lastError as Error).message}` : ""}`);
    }
    await delay(intervalMs);
  }
}

function execFileText(file: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { timeout: 60_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${error.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
