package worldcheck

import (
	"encoding/binary"
	"fmt"
)

// NBT tag types.
const (
	tagEnd = iota
	tagByte
	tagShort
	tagInt
	tagLong
	tagFloat
	tagDouble
	tagByteArray
	tagString
	tagList
	tagCompound
	tagIntArray
	tagLongArray
)

// maxDepth is the deepest nesting of compounds and lists accepted, the
// game's own limit (NbtAccounter).
const maxDepth = 512

// coords are a chunk's xPos and zPos, where found.
type coords struct {
	x, z       int32
	hasX, hasZ bool
}

func (c *coords) set(name string, v int32) {
	switch name {
	case "xPos":
		c.x, c.hasX = v, true
	case "zPos":
		c.z, c.hasZ = v, true
	}
}

// checkShape walks the NBT document b without allocating per tag and
// reports the first structural problem: a length running past the end,
// nesting deeper than maxDepth, an unknown tag type. It runs before go-mc
// decodes b: go-mc's decoder recurses once per nesting level without a
// bound (a few MiB of nested lists grow the stack by hundreds of MiB) and
// sizes arrays and lists from the input before reading them.
//
// On the way it picks up the root's xPos/zPos ints (top) and those of its
// Level compound (level, chunks before 1.18): decoding a chunk again with
// go-mc only for them would cost a third of the check's CPU (its decoder
// skips every other tag by reflection, allocating each name).
func checkShape(b []byte) (top, level coords, err error) {
	err = walkShape(b, &top, &level)
	return top, level, err
}

func walkShape(b []byte, top, level *coords) error {
	p := 0
	name := ""
	need := func(n int) error {
		if n < 0 || len(b)-p < n {
			return fmt.Errorf("nbt: truncated at byte %d (want %d more)", p, n)
		}
		return nil
	}
	str := func() error {
		if err := need(2); err != nil {
			return err
		}
		n := int(binary.BigEndian.Uint16(b[p:]))
		p += 2
		if err := need(n); err != nil {
			return err
		}
		p += n
		return nil
	}
	// tagName reads a compound member's name; only names at the root and
	// in its Level compound are kept (as strings), the only ones looked at.
	tagName := func(keep bool) error {
		start := p
		if err := str(); err != nil {
			return err
		}
		name = ""
		if keep {
			name = string(b[start+2 : p])
		}
		return nil
	}
	length := func() (int, error) {
		if err := need(4); err != nil {
			return 0, err
		}
		n := int32(binary.BigEndian.Uint32(b[p:]))
		p += 4
		if n < 0 {
			return 0, fmt.Errorf("nbt: negative length %d at byte %d", n, p-4)
		}
		return int(n), nil
	}
	// frame is an open compound (list < 0) or list (left elements of type elem).
	type frame struct {
		elem  byte
		left  int
		list  bool
		level bool // the root's Level compound
	}
	var stack []frame
	// value consumes one value of type t; a compound or list pushes a frame.
	value := func(t byte) error {
		switch t {
		case tagByte, tagShort, tagInt, tagLong, tagFloat, tagDouble:
			n := elemSize(t)
			if err := need(n); err != nil {
				return err
			}
			if t == tagInt && name != "" {
				v := int32(binary.BigEndian.Uint32(b[p:]))
				if len(stack) == 1 {
					top.set(name, v)
				} else {
					level.set(name, v)
				}
			}
			p += n
		case tagString:
			return str()
		case tagByteArray, tagIntArray, tagLongArray:
			n, err := length()
			if err != nil {
				return err
			}
			size := elemSize(t)
			if n > (len(b)-p)/size {
				return fmt.Errorf("nbt: array of %d elements runs past the end at byte %d", n, p)
			}
			p += n * size
		case tagList, tagCompound:
			if len(stack) >= maxDepth {
				return fmt.Errorf("nbt: nested deeper than %d", maxDepth)
			}
			if t == tagCompound {
				stack = append(stack, frame{level: len(stack) == 1 && name == "Level"})
				return nil
			}
			if err := need(1); err != nil {
				return err
			}
			elem := b[p]
			p++
			n, err := length()
			if err != nil {
				return err
			}
			if elem > tagLongArray || (elem == tagEnd && n > 0) {
				return fmt.Errorf("nbt: list of unknown tag type %d", elem)
			}
			if n > len(b)-p { // every element takes at least a byte
				return fmt.Errorf("nbt: list of %d elements runs past the end at byte %d", n, p)
			}
			stack = append(stack, frame{elem: elem, left: n, list: true})
		default:
			return fmt.Errorf("nbt: unknown tag type %d at byte %d", t, p)
		}
		return nil
	}

	if err := need(1); err != nil {
		return err
	}
	if b[0] != tagCompound {
		return fmt.Errorf("nbt: root is tag type %d, not a compound", b[0])
	}
	p = 1
	if err := str(); err != nil {
		return err
	}
	if err := value(tagCompound); err != nil {
		return err
	}
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if f.list {
			if f.left == 0 {
				stack = stack[:len(stack)-1]
				continue
			}
			f.left--
			name = ""
			if err := value(f.elem); err != nil {
				return err
			}
			continue
		}
		if err := need(1); err != nil {
			return err
		}
		t := b[p]
		p++
		if t == tagEnd {
			stack = stack[:len(stack)-1]
			continue
		}
		if err := tagName(len(stack) == 1 || (len(stack) == 2 && f.level)); err != nil {
			return err
		}
		if err := value(t); err != nil {
			return err
		}
	}
	return nil
}

// elemSize is the size in bytes of a fixed-size tag, or of one element of
// an array tag.
func elemSize(t byte) int {
	switch t {
	case tagByte, tagByteArray:
		return 1
	case tagShort:
		return 2
	case tagInt, tagFloat, tagIntArray:
		return 4
	}
	return 8 // long, double, long array
}
