//! Protocol Buffers' wire format, walked by hand (no protobuf dependency): the fields of a message
//! as byte ranges of the model, and the writers of varint and length-delimited fields. Every
//! length and varint is checked against the buffer, nothing is allocated from an unchecked length,
//! and malformed input is an `Err` naming the message, the field and the byte offset.

/// Decoded value of one field. Length-delimited values are byte ranges into the model.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Value {
    Varint(u64),
    Fixed64,
    Bytes(usize, usize),
    Group,
    Fixed32,
}

/// One field: its number, value, and the byte range `start..end` of the whole field
/// (tag included) in the model.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Field {
    pub(crate) number: u32,
    wire: u8,
    pub(crate) value: Value,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

/// Iterator over the fields of the message in `data[pos..end]`.
pub(crate) struct Fields<'a> {
    data: &'a [u8],
    pos: usize,
    end: usize,
    ctx: &'static str,
}

/// Maximum nesting of (deprecated) protobuf groups we are willing to skip.
const MAX_GROUP_DEPTH: usize = 64;

impl<'a> Fields<'a> {
    pub(crate) fn new(data: &'a [u8], pos: usize, end: usize, ctx: &'static str) -> Self {
        debug_assert!(pos <= end && end <= data.len());
        Fields {
            data,
            pos,
            end,
            ctx,
        }
    }

    /// Reads one tag; returns (field number, wire type, position after the tag).
    fn read_tag(&self, pos: usize) -> Result<(u32, u8, usize), String> {
        let (tag, next) = read_varint(self.data, pos, self.end, self.ctx)?;
        let tag = u32::try_from(tag)
            .map_err(|_| format!("{}: tag {tag} at byte {pos} is out of range", self.ctx))?;
        let number = tag >> 3;
        if number == 0 {
            return Err(format!(
                "{}: invalid field number 0 at byte {pos}",
                self.ctx
            ));
        }
        Ok((number, (tag & 7) as u8, next))
    }

    /// Skips a fixed-size or length-delimited value starting at `pos`; returns the value and
    /// the position after it. Groups are handled by the caller.
    fn read_value(&self, number: u32, wire: u8, pos: usize) -> Result<(Value, usize), String> {
        let ctx = self.ctx;
        match wire {
            0 => {
                let (v, next) = read_varint(self.data, pos, self.end, ctx)?;
                Ok((Value::Varint(v), next))
            }
            1 => Ok((Value::Fixed64, self.take(number, pos, 8)?)),
            2 => {
                let (len, start) = read_varint(self.data, pos, self.end, ctx)?;
                let len = usize::try_from(len).unwrap_or(usize::MAX);
                let end = self.take(number, start, len)?;
                Ok((Value::Bytes(start, end), end))
            }
            5 => Ok((Value::Fixed32, self.take(number, pos, 4)?)),
            _ => Err(format!(
                "{ctx}: field {number} at byte {pos} has invalid wire type {wire}"
            )),
        }
    }

    /// Checks that `len` bytes starting at `pos` lie within the message; returns `pos + len`.
    fn take(&self, number: u32, pos: usize, len: usize) -> Result<usize, String> {
        match pos.checked_add(len) {
            Some(end) if end <= self.end => Ok(end),
            _ => Err(format!(
                "{}: field {number} at byte {pos} needs {len} bytes, but only {} remain \
                 (truncated or corrupt model)",
                self.ctx,
                self.end - pos.min(self.end)
            )),
        }
    }

    pub(crate) fn next_field(&mut self) -> Result<Option<Field>, String> {
        if self.pos >= self.end {
            return Ok(None);
        }
        let start = self.pos;
        let (number, wire, pos) = self.read_tag(start)?;
        let (value, end) = match wire {
            3 => (Value::Group, self.skip_group(number, pos)?),
            4 => {
                return Err(format!(
                    "{}: unexpected end-group tag for field {number} at byte {start}",
                    self.ctx
                ))
            }
            _ => self.read_value(number, wire, pos)?,
        };
        self.pos = end;
        Ok(Some(Field {
            number,
            wire,
            value,
            start,
            end,
        }))
    }

    /// Skips the body of a group started for field `number`, up to and including its end tag.
    fn skip_group(&self, number: u32, mut pos: usize) -> Result<usize, String> {
        let mut stack = [0u32; MAX_GROUP_DEPTH];
        let mut depth = 1;
        stack[0] = number;
        while depth > 0 {
            if pos >= self.end {
                return Err(format!(
                    "{}: group for field {} is not terminated (truncated or corrupt model)",
                    self.ctx,
                    stack[depth - 1]
                ));
            }
            let (n, wire, next) = self.read_tag(pos)?;
            pos = match wire {
                3 => {
                    if depth == MAX_GROUP_DEPTH {
                        return Err(format!(
                            "{}: groups nested too deeply at byte {pos}",
                            self.ctx
                        ));
                    }
                    stack[depth] = n;
                    depth += 1;
                    next
                }
                4 => {
                    if stack[depth - 1] != n {
                        return Err(format!(
                            "{}: end-group tag for field {n} at byte {pos} closes group {}",
                            self.ctx,
                            stack[depth - 1]
                        ));
                    }
                    depth -= 1;
                    next
                }
                _ => self.read_value(n, wire, next)?.1,
            };
        }
        Ok(pos)
    }
}

pub(crate) fn wire_error(ctx: &str, f: &Field, what: &str, expected: u8) -> String {
    format!(
        "{ctx}: field {} ({what}) at byte {} has wire type {}, expected {expected}",
        f.number, f.start, f.wire
    )
}

/// Reads a varint at `data[pos..end]`; returns the value and the position after it.
pub(crate) fn read_varint(
    data: &[u8],
    pos: usize,
    end: usize,
    ctx: &str,
) -> Result<(u64, usize), String> {
    let mut value = 0u64;
    for i in 0..10 {
        let p = pos + i;
        if p >= end {
            return Err(format!(
                "{ctx}: varint at byte {pos} runs past the end of its message \
                 (truncated or corrupt model)"
            ));
        }
        let b = data[p];
        if i == 9 && b > 1 {
            return Err(format!("{ctx}: varint at byte {pos} overflows 64 bits"));
        }
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((value, p + 1));
        }
    }
    Err(format!(
        "{ctx}: varint at byte {pos} is longer than 10 bytes"
    ))
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(crate) fn put_tag(out: &mut Vec<u8>, number: u32, wire: u8) {
    put_varint(out, (u64::from(number) << 3) | u64::from(wire));
}

pub(crate) fn put_varint_field(out: &mut Vec<u8>, number: u32, value: u64) {
    put_tag(out, number, 0);
    put_varint(out, value);
}

pub(crate) fn put_len_field(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_tag(out, number, 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}
