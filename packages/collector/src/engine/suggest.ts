// The "did you mean" of config keys is the programs' one suggestion (shared with the command lines).
export { closestName, editDistance } from "@ws/protocol";
