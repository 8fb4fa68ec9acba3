/**
 * A reason the gateway cannot start that the operator must fix (the command prints its message
 * alone and exits 1). It lives outside app.ts so that the parts app.ts starts can throw it too.
 */
export class StartupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StartupError';
  }
}
