// Sends one raw JSON line to the agent's lease socket, answering the identity
// challenge honestly, and prints the answer. The tests use it to send requests
// the CLI never would (a claimed uid, a claimed user).
import { connect } from "node:net";
import { proofDirFor, writeProof } from "../../../src/lease/peer-proof.js";
import { parseChallenge } from "../../../src/lease/wire.js";

const [socketPath, requestLine] = process.argv.slice(2);
if (!socketPath || !requestLine) {
  process.stderr.write("usage: raw-request SOCKET JSON\n");
  process.exit(2);
}
const socket = connect(socketPath);
let buffer = "";
let challenged = false;
socket.on("data", async (chunk) => {
  buffer += chunk.toString("utf8");
  let newline = buffer.indexOf("\n");
  while (newline >= 0) {
    const line = buffer.slice(0, newline);
    buffer = buffer.slice(newline + 1);
    if (!challenged) {
      challenged = true;
      const challenge = parseChallenge(line);
      if (!challenge) throw new Error(`no challenge: ${line}`);
      await writeProof(proofDirFor(socketPath), challenge.proof, challenge.nonce);
      socket.write(`${requestLine}\n`);
    } else {
      process.stdout.write(`${line}\n`);
      socket.end();
      return;
    }
    newline = buffer.indexOf("\n");
  }
});
