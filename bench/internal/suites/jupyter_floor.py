# The "F jupyter" floor of the runcode suite: a stock ipykernel started
# and driven by jupyter_client (the reference Jupyter client), as a
# notebook server would. Each line read on stdin is a cell as a JSON
# string: it executes it, waits for the execute_reply and for the kernel's
# idle status, and prints the main result's text/plain ("" when there is
# none), a tab, and the number of characters the cell wrote to stdout.
import json
import sys

from jupyter_client import KernelManager

km = KernelManager(kernel_name="python3")
km.kernel_cmd = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
km.start_kernel(stderr=open("/dev/null", "w"))
kc = km.client()
kc.start_channels()
kc.wait_for_ready(timeout=60)
try:
    for line in sys.stdin:
        msg_id = kc.execute(json.loads(line))
        result, stdout, replied, idle = "", 0, False, False
        while not replied:
            reply = kc.get_shell_msg(timeout=30)
            replied = reply["parent_header"].get("msg_id") == msg_id
        while not idle:
            msg = kc.get_iopub_msg(timeout=30)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
                stdout += len(msg["content"]["text"])
            elif msg["msg_type"] == "execute_result":
                result = msg["content"]["data"].get("text/plain", "")
            elif msg["msg_type"] == "status":
                idle = msg["content"]["execution_state"] == "idle"
        print(result + "\t" + str(stdout), flush=True)
finally:
    kc.stop_channels()
    km.shutdown_kernel(now=True)
