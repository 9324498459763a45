# The first code cell of every chapter: paste this file unchanged as the
# notebook's first code cell. It installs the package where it is missing
# (Colab, a fresh kernel) and picks the device. Plain Python rather than %pip
# magics, so that it runs the same under Jupyter, Colab and nbval.
# Lines stay within 79 characters, the width of a code cell on the site.
import subprocess
import sys

# keep in step with _config.yml
REPOSITORY = "https://github.com/bertgpt-course/bertgpt"

try:
    import bertgpt
except ImportError:
    # torch is a version range in the package's requirements, so pip keeps
    # Colab's own torch build.
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q",
                           f"bertgpt @ git+{REPOSITORY}"])
    import importlib

    importlib.invalidate_caches()
    import bertgpt

device = bertgpt.default_device()  # "cuda", "mps" or "cpu"
print(f"device: {device}")
print(bertgpt.course_models())  # the two models every chapter argues from
