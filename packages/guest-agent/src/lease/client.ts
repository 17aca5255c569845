// The CLI's side of the lease socket: connect, answer the identity challenge
// when the request needs to know who we are, send one request, read one answer.
import { existsSync } from "node:fs";
import { connect } from "node:net";
import { StringDecoder } from "node:string_decoder";
import { proofDirFor, rootSocketFor, writeProof } from "./peer-proof.js";
import { MAX_LINE_BYTES, parseChallenge, takeLines, type Answer } from "./wire.js";
import { errorMessage } from "@ws/protocol";

export const DEFAULT_SOCKET_PATH = "/run/ws-agent/agent.sock";

/** The agent is not there to answer (not running, or the socket is missing). */
export class AgentUnavailableError extends Error {
  override name = "AgentUnavailableError";
  constructor(
    message: string,
    readonly socketPath: string,
    readonly code: string,
  ) {
    super(message);
  }
}

/** The agent answered with something that is not the lease protocol. */
export class AgentProtocolError extends Error {
  override name = "AgentProtocolError";
}

export type OutgoingRequest =
  | { op: "take"; seconds: number; reason: string; wait?: number }
  | { op: "list" }
  | { op: "status" }
  | { op: "cancel"; id: string }
  | { op: "cancel"; all: true }
  | { op: "schedule"; action: "set" | "clear" | "skip" | "status"; line?: string; tz?: string; date?: string };

const UNAVAILABLE_CODES = new Set(["ENOENT", "ECONNREFUSED", "ENOTDIR", "ECONNRESET", "EPIPE"]);

export async function callAgent(socketPath: string, request: OutgoingRequest, timeoutMs = 20_000): Promise<Answer> {
  // Root has a socket of its own that no user can fill; everyone else proves their uid on every
  // connection (the agent counts connections per uid, so even list and status carry the proof).
  const rootSocket = rootSocketFor(socketPath);
  const asRoot = process.getuid?.() === 0 && existsSync(rootSocket);
  const needsIdentity = !asRoot;
  return new Promise<Answer>((resolve, reject) => {
    const socket = connect(asRoot ? rootSocket : socketPath);
    const decoder = new StringDecoder("utf8");
    let buffer = "";
    let challenged = false;
    let proofProblem: string | undefined;
    let settled = false;
    const finish = (error: Error | undefined, answer?: Answer): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (error) reject(error);
      else resolve(answer!);
    };
    const timer = setTimeout(
      () => finish(new AgentProtocolError(`the agent did not answer within ${timeoutMs / 1000}s`)),
      timeoutMs,
    );
    socket.on("error", (error: NodeJS.ErrnoException) => {
      const code = error.code ?? "";
      if (!challenged && UNAVAILABLE_CODES.has(code))
        finish(new AgentUnavailableError(error.message, socketPath, code));
      else if (code === "EACCES") finish(new AgentUnavailableError(error.message, socketPath, code));
      else finish(error);
    });
    socket.on("close", () => finish(new AgentProtocolError("the agent closed the connection without answering")));
    socket.on("data", (chunk: Buffer) => {
      buffer += decoder.write(chunk);
      if (Buffer.byteLength(buffer) > 4 * MAX_LINE_BYTES + 1024 * 1024)
        return finish(new AgentProtocolError("the agent's answer is too large"));
      const { lines, rest } = takeLines(buffer);
      buffer = rest;
      for (const line of lines) {
        if (!challenged) {
          const challenge = parseChallenge(line);
          if (!challenge) {
            // A busy agent answers with an error instead of a challenge.
            const early = parseAnswer(line);
            return early
              ? finish(undefined, early)
              : finish(new AgentProtocolError(`${socketPath} does not speak the ws-agent lease protocol`));
          }
          challenged = true;
          void (async () => {
            if (needsIdentity) {
              try {
                await writeProof(proofDirFor(socketPath), challenge.proof, challenge.nonce);
              } catch (error) {
                proofProblem = errorMessage(error);
              }
            }
            if (!settled) socket.write(`${JSON.stringify(request)}\n`);
          })();
          continue;
        }
        const answer = parseAnswer(line);
        if (!answer) return finish(new AgentProtocolError("the agent's answer is not valid JSON"));
        if (!answer.ok && answer.error.code === "unverified" && proofProblem) {
          answer.error.message += ` (creating the proof file failed: ${proofProblem})`;
        }
        return finish(undefined, answer);
      }
    });
  });
}

function parseAnswer(line: string): Answer | undefined {
  try {
    const value: unknown = JSON.parse(line);
    if (typeof value !== "object" || value === null || typeof (value as { ok?: unknown }).ok !== "boolean")
      return undefined;
    return value as Answer;
  } catch {
    return undefined;
  }
}
