package code

// pythonSetup runs silently in every new Python kernel. Under the Agg
// backend (matplotlib.use('Agg'), common in scripts) plt.show() does
// nothing; this makes it display each open figure as image/png (base64)
// and close it, as the inline backend does at the end of a cell. pyplot is
// patched when it is first imported (a one-shot import hook), so a kernel
// that never plots never loads matplotlib.
//
// It also starts a watchdog thread: when rayd dies without stopping its
// kernels (SIGKILL, a crash), the kernel is reparented, sees its parent
// change within a second and exits, so no orphaned kernel outlives rayd.
// (PR_SET_PDEATHSIG is not used: it follows the forking thread, and rayd's
// file layer ends locked threads.)
const pythonSetup = `def _rayito_setup():
    import os, sys, threading, time, importlib.abc, importlib.util
    parent = os.getppid()
    def watch():
        while True:
            time.sleep(1)
            if os.getppid() != parent:
                os._exit(1)
    threading.Thread(target=watch, name='rayd-parent-watch', daemon=True).start()
    def patch(plt):
        orig = plt.show
        def show(*args, **kwargs):
            import matplotlib
            if matplotlib.get_backend().lower() != 'agg':
                return orig(*args, **kwargs)
            import base64, io
            from IPython.display import display
            for num in plt.get_fignums():
                fig = plt.figure(num)
                buf = io.BytesIO()
                fig.savefig(buf, format='png', bbox_inches='tight')
                display({'image/png': base64.b64encode(buf.getvalue()).decode('ascii'), 'text/plain': repr(fig)}, raw=True)
            plt.close('all')
        show.__wrapped__ = orig
        plt.show = show
    if 'matplotlib.pyplot' in sys.modules:
        patch(sys.modules['matplotlib.pyplot'])
        return
    class _Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != 'matplotlib.pyplot':
                return None
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            if spec is None or spec.loader is None or not hasattr(spec.loader, 'exec_module'):
                return spec
            exec_module = spec.loader.exec_module
            def exec_and_patch(module):
                exec_module(module)
                patch(module)
            spec.loader.exec_module = exec_and_patch
            return spec
    sys.meta_path.insert(0, _Finder())
_rayito_setup()
del _rayito_setup
`
