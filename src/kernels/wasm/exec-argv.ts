/**
 * The parent's Node options for a worker started from a file: all but --input-type, which Node
 * refuses for a file. A worker inherits the parent's options, so a script run as
 * `node --input-type=module -e ...` (or piped to `node --input-type=module`) got no kernel
 * worker, and loadModel fell back to the plain TypeScript reference kernels with a warning.
 */
export function workerExecArgv(execArgv: readonly string[]): string[] {
  const kept: string[] = [];
  for (let i = 0; i < execArgv.length; i++) {
    const arg = execArgv[i]!;
    if (arg === "--input-type") i++; // its value is the next argument
    else if (!arg.startsWith("--input-type=")) kept.push(arg);
  }
  return kept;
}
