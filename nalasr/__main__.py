"""``python -m nalasr``: the command line (:func:`nalasr.cli.main`).

Guarded: a multiprocessing "spawn" worker (``nalasr upscale`` on several GPUs, DataLoader workers) re-imports the
main module as ``__mp_main__``; it must not start the CLI again. The import sits under the guard too, so such a
worker pays for nothing it did not ask for.
"""

if __name__ == "__main__":
    from nalasr.cli import main

    main()
