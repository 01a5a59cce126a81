/*
 * sitecustomize.c -- the sitecustomize.py trainctl writes into a watched
 * job's run folder (diag/sitecustomize.py) and puts first on the workers'
 * PYTHONPATH (launch/env.c), so that every Python process of the job dumps
 * the stacks of all its threads when the supervisor sends it
 * $TRAINCTL_STACK_SIGNAL, with no change to the user's script
 * (docs/diagnostics.md).
 *
 * Each process opens $TRAINCTL_STACK_DIR/<pid>.stack and registers
 * faulthandler on the signal, writing there (a forked child registers its
 * own file).  The file's existence tells the supervisor which processes
 * can take the signal: it is never sent to one that did not register, whose
 * default action would end it.  Then the sitecustomize this one shadows
 * (Debian ships /usr/lib/python3.X/sitecustomize.py) runs as before.
 */
#include "diag/diag.h"

static const char sitecustomize_py[] =
	"# Written by trainctl (docs/diagnostics.md): on the signal in\n"
	"# $TRAINCTL_STACK_SIGNAL, faulthandler writes the stacks of every thread of this\n"
	"# process to $TRAINCTL_STACK_DIR/<pid>.stack.  The sitecustomize this file\n"
	"# shadows on sys.path runs afterwards, as it would without trainctl.\n"
	"def _trainctl_stacks():\n"
	"    import os, sys\n"
	"    here = os.path.dirname(os.path.abspath(__file__))\n"
	"    try:\n"
	"        sig = int(os.environ.get('TRAINCTL_STACK_SIGNAL', '0'))\n"
	"        d = os.environ.get('TRAINCTL_STACK_DIR', '')\n"
	"        if sig > 0 and d and os.path.isdir(d):\n"
	"            import faulthandler\n"
	"            keep = []\n"
	"            def register():\n"
	"                f = open(os.path.join(d, '%d.stack' % os.getpid()), 'w')\n"
	"                keep[:] = [f]  # faulthandler holds the fd, not the file object\n"
	"                faulthandler.register(sig, file=f, all_threads=True, chain=False)\n"
	"            register()\n"
	"            if hasattr(os, 'register_at_fork'):\n"
	"                os.register_at_fork(after_in_child=register)\n"
	"    except Exception as e:\n"
	"        sys.stderr.write('trainctl: no stack dumps for this process: %s\\n' % e)\n"
	"    try:\n"
	"        sys.path.remove(here)\n"
	"    except ValueError:\n"
	"        pass\n"
	"    for p in sys.path:\n"
	"        f = os.path.join(p or '.', 'sitecustomize.py')\n"
	"        if os.path.abspath(p or '.') != here and os.path.isfile(f):\n"
	"            import importlib.util\n"
	"            spec = importlib.util.spec_from_file_location('sitecustomize', f)\n"
	"            m = importlib.util.module_from_spec(spec)\n"
	"            sys.modules['sitecustomize'] = m\n"
	"            spec.loader.exec_module(m)\n"
	"            break\n"
	"_trainctl_stacks()\n"
	"del _trainctl_stacks\n";

const char *diag_sitecustomize_py(void)
{
	return sitecustomize_py;
}
