// The one way an error becomes text for a log line, a Report's source message or a CLI answer:
// its message, with the errno code in front when the message does not already say it.
export function errorMessage(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code && !error.message.includes(code) ? `${code}: ${error.message}` : error.message;
  }
  return String(error);
}
