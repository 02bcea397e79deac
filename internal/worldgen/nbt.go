package worldgen

import (
	"encoding/binary"
	"math"
)

// NBT tag types (the subset the generator writes).
const (
	tagEnd       = 0
	tagByte      = 1
	tagShort     = 2
	tagInt       = 3
	tagLong      = 4
	tagFloat     = 5
	tagDouble    = 6
	tagByteArray = 7
	tagString    = 8
	tagList      = 9
	tagCompound  = 10
	tagIntArray  = 11
	tagLongArray = 12
)

// nbt appends big-endian NBT (Minecraft's Named Binary Tag format) to a
// reusable buffer. Named methods write a named tag inside a compound; the
// unnamed forms (elem*) write list elements. The caller keeps lists and
// compounds balanced; nothing is validated, as the output only has to look
// like what the game writes.
type nbt struct{ b []byte }

func (n *nbt) reset() { n.b = n.b[:0] }

func (n *nbt) head(t byte, name string) {
	n.b = append(n.b, t, byte(len(name)>>8), byte(len(name)))
	n.b = append(n.b, name...)
}

func (n *nbt) byteTag(name string, v int8) { n.head(tagByte, name); n.b = append(n.b, byte(v)) }

func (n *nbt) short(name string, v int16) {
	n.head(tagShort, name)
	n.b = binary.BigEndian.AppendUint16(n.b, uint16(v))
}

func (n *nbt) int(name string, v int32) {
	n.head(tagInt, name)
	n.b = binary.BigEndian.AppendUint32(n.b, uint32(v))
}

func (n *nbt) long(name string, v int64) {
	n.head(tagLong, name)
	n.b = binary.BigEndian.AppendUint64(n.b, uint64(v))
}

func (n *nbt) float(name string, v float32) {
	n.head(tagFloat, name)
	n.b = binary.BigEndian.AppendUint32(n.b, math.Float32bits(v))
}

func (n *nbt) str(name, v string) { n.head(tagString, name); n.elemStr(v) }

func (n *nbt) elemStr(v string) {
	n.b = append(n.b, byte(len(v)>>8), byte(len(v)))
	n.b = append(n.b, v...)
}

func (n *nbt) elemDouble(v float64) {
	n.b = binary.BigEndian.AppendUint64(n.b, math.Float64bits(v))
}

func (n *nbt) elemFloat(v float32) {
	n.b = binary.BigEndian.AppendUint32(n.b, math.Float32bits(v))
}

// compound opens a named compound; end closes it (and an unnamed list
// element compound, which needs no opening tag).
func (n *nbt) compound(name string) { n.head(tagCompound, name) }
func (n *nbt) end()                 { n.b = append(n.b, tagEnd) }

// list opens a named list of count elements of type elem.
func (n *nbt) list(name string, elem byte, count int) {
	n.head(tagList, name)
	n.b = append(n.b, elem)
	n.b = binary.BigEndian.AppendUint32(n.b, uint32(count))
}

func (n *nbt) byteArray(name string, v []byte) {
	n.head(tagByteArray, name)
	n.b = binary.BigEndian.AppendUint32(n.b, uint32(len(v)))
	n.b = append(n.b, v...)
}

func (n *nbt) intArray(name string, v ...int32) {
	n.head(tagIntArray, name)
	n.b = binary.BigEndian.AppendUint32(n.b, uint32(len(v)))
	for _, x := range v {
		n.b = binary.BigEndian.AppendUint32(n.b, uint32(x))
	}
}

// longArray opens a named long array of count elements; the caller appends
// exactly count values with elemLong.
func (n *nbt) longArray(name string, count int) {
	n.head(tagLongArray, name)
	n.b = binary.BigEndian.AppendUint32(n.b, uint32(count))
}

func (n *nbt) elemLong(v uint64) { n.b = binary.BigEndian.AppendUint64(n.b, v) }
