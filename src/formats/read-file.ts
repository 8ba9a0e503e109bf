import { openFile, type RandomAccessFile } from "../platform/host.js";
import { readFailure } from "./errors.js";

/**
 * A small file a model folder holds (a JSON config, merges.txt, a template) read whole, and
 * bounded: refused past `maxBytes` by its size at open (`tooLarge` makes that error), never read
 * past that size, and only a regular file (openFile: a symlink to a FIFO or /dev/zero would wait
 * or read forever). System errors name the file.
 */
export function readWholeFile(path: string, maxBytes: number, tooLarge: (size: number) => Error): Buffer {
  let file: RandomAccessFile;
  try {
    file = openFile(path);
  } catch (e) {
    throw readFailure(path, e);
  }
  try {
    if (file.size > maxBytes) throw tooLarge(file.size);
    const buf = Buffer.alloc(file.size);
    let got = 0;
    while (got < buf.length) {
      const n = file.read(buf, got, buf.length - got, got);
      if (n === 0) break; // cut short meanwhile: the parser says what is missing
      got += n;
    }
    return buf.subarray(0, got);
  } catch (e) {
    throw readFailure(path, e);
  } finally {
    file.close();
  }
}
