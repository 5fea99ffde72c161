'use strict';
// listen/unlisten (bindings-node/lib/api/values.cjs), the JS layer's one
// listener per AbortSignal behind every wait on it: the rules of
// addEventListener('abort', listener, { once: true }), kept for each wait.
// The layer is the same file in the napi and wasm builds.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');

const { listen, unlisten } = require('../../bindings-node/lib/api/values.cjs');

describe('listen', () => {
  it('calls each listener once, in the order they listened, through one listener of the signal', () => {
    const controller = new AbortController();
    const calls = [];
    const first = () => calls.push('first');
    listen(controller.signal, first);
    listen(controller.signal, () => calls.push('second'));
    listen(controller.signal, first);
    controller.abort();
    controller.signal.dispatchEvent(new Event('abort'));
    assert.deepEqual(calls, ['first', 'second']);
  });

  it('does not call a listener removed before or while the abort is dispatched', () => {
    const controller = new AbortController();
    const calls = [];
    const gone = () => calls.push('gone');
    const later = () => calls.push('later');
    listen(controller.signal, gone);
    unlisten(controller.signal, gone);
    listen(controller.signal, () => {
      calls.push('removes later');
      unlisten(controller.signal, later);
    });
    listen(controller.signal, later);
    controller.abort();
    assert.deepEqual(calls, ['removes later']);
  });

  it('a listener that throws does not keep the others from being called, and its error is thrown to the signal', () => {
    const own = [];
    const signal = { aborted: false, addEventListener: (type, listener) => own.push(listener), removeEventListener() {} };
    const calls = [];
    listen(signal, () => {
      throw new Error('listener failed');
    });
    listen(signal, () => calls.push('called'));
    listen(signal, () => {
      throw new Error('a later listener failed');
    });
    // As the signal dispatches the abort: it reports what its (first failing) listener throws.
    assert.throws(() => own[0](), { message: 'listener failed' });
    assert.deepEqual(calls, ['called']);
  });

  it('takes the signal off once its last listener goes, and listens again after', () => {
    const own = [];
    const signal = {
      aborted: false,
      addEventListener: (type, listener) => own.push(listener),
      removeEventListener: (type, listener) => own.splice(own.indexOf(listener), 1),
    };
    const a = () => {};
    const b = () => {};
    listen(signal, a);
    listen(signal, b);
    assert.equal(own.length, 1);
    unlisten(signal, a);
    assert.equal(own.length, 1);
    unlisten(signal, b);
    assert.equal(own.length, 0);
    listen(signal, a);
    assert.equal(own.length, 1);
    unlisten(signal, a);
    assert.equal(own.length, 0);
  });

  it("a signal whose addEventListener throws: the error is the caller's, and nothing is kept", () => {
    const signal = {
      aborted: false,
      addEventListener() {
        throw new Error('cannot listen');
      },
      removeEventListener() {},
    };
    assert.throws(() => listen(signal, () => {}), { message: 'cannot listen' });
    const working = [];
    signal.addEventListener = (type, listener) => working.push(listener);
    listen(signal, () => {});
    assert.equal(working.length, 1, 'listened afresh');
  });
});
