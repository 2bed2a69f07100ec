"""Files: images (:mod:`.imageio`; 8-bit PNG encoding in :mod:`.png`), weights files (:mod:`.weights`), atomic
writes (:mod:`.fsutil`)."""
