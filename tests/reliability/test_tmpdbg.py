from reliability_support import *
def test_dbg(watch, tmp_path, logdir):
    cfg = write_config(tmp_path/"c.yaml", fast_config(trainer={"start_method": "forkserver", "sharing_strategy": "file_system", "checkpoint_every_s": 0.3, "max_seconds": 8}))
    r = Train(watch, "--config", cfg, "--logdir", logdir, env=watch.env(**{GRACE_ENV: "1.0"}))
    import time; time.sleep(4)
    for p in watch.tagged(): print(p, cmdline(p), open(f"/proc/{p}/wchan").read(), open(f"/proc/{p}/stat").read().split()[2])
    import subprocess; print(subprocess.run(["py-spy","--version"],capture_output=True) if False else "")
    code = r.finish(60); print(code); print(r.stderr[-3000:]); assert 0
