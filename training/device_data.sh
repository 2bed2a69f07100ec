#!/usr/bin/env bash
# On the device machine: make .carry/data/{train,train_extra} from the parts that training/pack_data.py made.
# Each call carries .carry/parts.sha256 and one part (.carry/parts/NN); a warm machine keeps earlier parts.
# Exit 0 when the data is unpacked (now or by an earlier call), 3 naming the parts still to send.
set -u
DONE=.carry/data/.unpacked
LIST=.carry/parts.sha256
if [ -f $DONE ] && cmp -s $LIST $DONE; then echo "data: unpacked earlier"; exit 0; fi
[ -f $LIST ] || { echo "data: carry .carry/parts.sha256 (python training/pack_data.py makes it)"; exit 3; }
missing=""
while read -r sum name; do
  f=.carry/parts/$name
  if [ ! -f $f ] || [ "$(sha256sum $f | cut -d' ' -f1)" != "$sum" ]; then missing="$missing .carry/parts/$name"; fi
done < $LIST
if [ -n "$missing" ]; then
  echo "data: parts missing on this machine; send each in its own call (carry it and .carry/parts.sha256):$missing"
  exit 3
fi
mkdir -p .carry/data
cat $(awk '{print ".carry/parts/"$2}' $LIST) | tar -x -C .carry/data || { echo "data: unpacking failed"; exit 3; }
cp $LIST $DONE
echo "data: unpacked $(find .carry/data -type f | wc -l) files, $(du -sh .carry/data | cut -f1)"
