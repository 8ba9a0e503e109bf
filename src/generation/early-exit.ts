/**
 * A stream whose request is queued when it is made (so a refused option throws at the call) and
 * that cancels the request when its reader leaves it, even before the first step: return() or
 * throw() on an async generator not yet started skip its body's finally, so the request would run
 * on unread. `cancel` runs on those calls; the generator's own finally covers the rest.
 */
export function cancelOnEarlyExit<T, R>(it: AsyncGenerator<T, R>, cancel: () => void): AsyncGenerator<T, R> {
  const [end, fail] = [it.return.bind(it), it.throw.bind(it)];
  it.return = (value) => {
    cancel();
    return end(value);
  };
  it.throw = (error) => {
    cancel();
    return fail(error);
  };
  return it;
}
