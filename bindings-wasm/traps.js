// Put into wasm-bindgen's JS glue by scripts/wasm.sh (guard_traps), which
// passes the module's exports through it: not a module of its own.
//
// A trap (running out of memory: the module holds 4 GiB at most, a browser
// may refuse it sooner; an argument of 2 GiB or more) ends a call without
// running the rest of the module's code, and so without the end of each
// function that gives its frame of the shadow stack (in the module's
// memory, under the exported global `__stack_pointer`, see build.rs) back.
// Each trap kept those frames: after 1,200 to 2,000 the stack ran out, every
// call of every limiter trapped ("memory access out of bounds"), and so did
// the FinalizationRegistry's frees, which ended the Node process (in a
// memory grown to 4 GiB, the frames wrapped round to its top instead, over
// the heap: tests/js/traps.test.cjs). Once the
// outermost call into the module has failed, no frame of it is live: the
// stack pointer goes back to where it started. Every export that may trap
// is wrapped, the keyed and policy decisions too: a call can enter the
// module again from inside another (a getter, a replaced
// crypto.getRandomValues), and resetting the stack under a live frame would
// hand that frame's memory to the next call.
//
// Not the decisions on one limiter (`unguarded`): they cannot trap (they
// neither allocate nor call JS; a limiter a trap left borrowed answers
// them with a status, `unusable` in src/lib.rs), and so need no guard,
// whose `try` kept V8 from inlining their call into the module (a third of
// a decision's time). Calling no JS, they hold no frame another call could
// come in under. The keyed and policy decisions keep theirs: a store's
// first operation reads crypto.getRandomValues (JS, which may call back
// in), and a keyed token bucket of several bandwidths boxes each new key's
// state infallibly (a keyed store's other growth answers `out_of_memory`
// instead of trapping). Unguarded where neither applies, they measured no
// faster: the guard is a small part of a keyed decision's time, and a
// policy's took longer. (Declared inside: the Node glue calls this
// function, which is hoisted, before the code below it runs.)
function __rk_guard_traps(exports) {
    const unguarded = new Set(['tryAcquire', 'peek', 'reserve']);
    const stack = exports.__stack_pointer;
    if (!(stack instanceof WebAssembly.Global)) {
        throw new Error('ratekeeper: the .wasm exports no __stack_pointer (bindings-wasm/build.rs exports it)');
    }
    const base = stack.value;
    let depth = 0;
    const failed = () => {
        if (depth === 1) stack.value = base;
    };
    // One wrapper per number of parameters, calling with exactly those, as
    // the glue does: no rest parameter and spread on a decision's path.
    const guard = (f) => {
        switch (f.length) {
            case 0: return function () { depth++; try { return f(); } catch (e) { failed(); throw e; } finally { depth--; } };
            case 1: return function (a) { depth++; try { return f(a); } catch (e) { failed(); throw e; } finally { depth--; } };
            case 2: return function (a, b) { depth++; try { return f(a, b); } catch (e) { failed(); throw e; } finally { depth--; } };
            case 3: return function (a, b, c) { depth++; try { return f(a, b, c); } catch (e) { failed(); throw e; } finally { depth--; } };
            case 4: return function (a, b, c, d) { depth++; try { return f(a, b, c, d); } catch (e) { failed(); throw e; } finally { depth--; } };
            case 5: return function (a, b, c, d, g) { depth++; try { return f(a, b, c, d, g); } catch (e) { failed(); throw e; } finally { depth--; } };
            case 6: return function (a, b, c, d, g, h) { depth++; try { return f(a, b, c, d, g, h); } catch (e) { failed(); throw e; } finally { depth--; } };
            case 7: return function (a, b, c, d, g, h, i) { depth++; try { return f(a, b, c, d, g, h, i); } catch (e) { failed(); throw e; } finally { depth--; } };
            default: return function (...args) { depth++; try { return f(...args); } catch (e) { failed(); throw e; } finally { depth--; } };
        }
    };
    const guarded = {};
    for (const [name, value] of Object.entries(exports)) {
        guarded[name] = typeof value === 'function' && !unguarded.has(name) ? guard(value) : value;
    }
    return guarded;
}
