"""Imported into the fork server as a preload module: the server removes its socket and the socket's directory at exit.

multiprocessing binds the fork server's socket at /tmp/pymp-XXXX/listener-YYYY,
in a temporary directory that only the main process removes, at a normal
exit: a main process killed by SIGKILL leaves both behind, one pair per run.
The fork server outlives the main process (it exits once the main process and
every child it forked are gone) and knows its own address, so it removes the
socket as it exits, then the directory if nothing else is in it. Importing
`sharing` puts this module on the fork server's preload list
(`lifecycle.preload_forkserver_cleanup`); the cost is one import in the server.
"""
import atexit
import os
from multiprocessing import forkserver


def _remove_listener() -> None:
    address = getattr(forkserver._forkserver, "_forkserver_address", None)
    if not isinstance(address, str) or not address.startswith(os.sep):  # none, or in the abstract namespace
        return
    for remove, target in ((os.unlink, address), (os.rmdir, os.path.dirname(address))):
        try:
            remove(target)
        except OSError:  # already gone (the main process exited normally), or the directory holds more
            pass


atexit.register(_remove_listener)
