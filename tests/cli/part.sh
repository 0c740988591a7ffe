# One part of a CLI test script as its own CTest test (tests/cli/lib.sh, "Parts"), run as
#   bash part.sh PARTS_DIR SCRIPT PART
# after cli.SCRIPT (its fixture set-up): passes when the script ran the part, exits 77 (CTest: Skipped)
# with the script's reason when it did not, and fails when the script never reported it.
f=$1/$2.$3
if [ ! -f "$f" ]; then
    echo "cli.$2 did not report part '$3': list it in '# ctest-parts:' and report it with part or part_skipped" >&2
    exit 1
fi
case $(head -n 1 "$f") in
    ran)
        echo "cli.$2: part '$3' ran; its cases are counted in cli.$2"
        exit 0
        ;;
    skipped:*)
        head -n 1 "$f"
        exit 77
        ;;
esac
echo "$f: unexpected content: $(head -c 200 "$f")" >&2
exit 1
