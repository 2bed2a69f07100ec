"""Files: images (:mod:`.imageio`), weights files (:mod:`.weights`), atomic writes (:mod:`.fsutil`)."""
