//! A small sparsity picture of a matrix for hovers: a grayscale PNG (darker
//! cells hold more entries) as a `data:` URI, which editors that draw
//! images in markdown show inline.
//!
//! The PNG is written uncompressed (deflate "stored" blocks): a 4-bit image
//! of at most 96 x 96 pixels is under 5 KB, small enough for a hover, and
//! the writer stays a page long instead of pulling in an image crate.

use crate::coo::CooTensor;

/// Largest side of the picture in pixels.
pub const SIDE: usize = 96;

/// Cell counts of a matrix scaled down to at most `SIDE` pixels a side,
/// keeping its aspect ratio. None for tensors that are not matrices.
pub fn density(t: &CooTensor) -> Option<(usize, usize, Vec<u32>)> {
    let [rows, cols] = t.dims[..] else {
        return None;
    };
    if rows == 0 || cols == 0 {
        return None;
    }
    let scale = (rows.max(cols) as f64 / SIDE as f64).max(1.0);
    let h = ((rows as f64 / scale).ceil() as usize).max(1);
    let w = ((cols as f64 / scale).ceil() as usize).max(1);
    let mut cells = vec![0u32; w * h];
    for e in 0..t.nnz() {
        let c = t.coord(e);
        let (r, q) = (
            (c[0] as f64 / scale) as usize,
            (c[1] as f64 / scale) as usize,
        );
        cells[r.min(h - 1) * w + q.min(w - 1)] += 1;
    }
    Some((w, h, cells))
}

/// The picture as a markdown image, or None for tensors that are not
/// matrices.
pub fn sparsity_markdown(name: &str, t: &CooTensor) -> Option<String> {
    let (w, h, cells) = density(t)?;
    let png = png_gray4(w, h, &shades(&cells));
    Some(format!(
        "![sparsity of {name}: {} x {}, {} entries](data:image/png;base64,{})",
        t.dims[0],
        t.dims[1],
        t.nnz(),
        base64(&png)
    ))
}

/// 4-bit gray levels: 15 (white) for empty cells, darker on a log scale.
fn shades(cells: &[u32]) -> Vec<u8> {
    let max = cells.iter().copied().max().unwrap_or(0).max(1) as f64;
    cells
        .iter()
        .map(|&n| {
            if n == 0 {
                15
            } else {
                (10.0 - 10.0 * ((n as f64).ln_1p() / max.ln_1p()))
                    .round()
                    .clamp(0.0, 10.0) as u8
            }
        })
        .collect()
}

/// A 4-bit grayscale PNG of `w` x `h` pixels (values 0..=15).
pub fn png_gray4(w: usize, h: usize, px: &[u8]) -> Vec<u8> {
    let row = w.div_ceil(2);
    let mut raw = Vec::with_capacity(h * (row + 1));
    for y in 0..h {
        raw.push(0); // filter: none
        for x in (0..w).step_by(2) {
            let a = px[y * w + x] & 15;
            let b = if x + 1 < w { px[y * w + x + 1] & 15 } else { 0 };
            raw.push(a << 4 | b);
        }
    }
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend((w as u32).to_be_bytes());
    ihdr.extend((h as u32).to_be_bytes());
    ihdr.extend([4, 0, 0, 0, 0]); // bit depth 4, grayscale, deflate, no filter, no interlace
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &zlib_stored(&raw));
    chunk(&mut out, b"IEND", &[]);
    out
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend((data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend(kind);
    out.extend(data);
    let crc = crc32(&out[start..]);
    out.extend(crc.to_be_bytes());
}

/// A zlib stream of stored (uncompressed) deflate blocks.
fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = if data.is_empty() {
        vec![&[][..]]
    } else {
        data.chunks(65535).collect()
    };
    for (n, b) in blocks.iter().enumerate() {
        out.push(u8::from(n + 1 == blocks.len()));
        let len = b.len() as u16;
        out.extend(len.to_le_bytes());
        out.extend((!len).to_le_bytes());
        out.extend(*b);
    }
    out.extend(adler32(data).to_be_bytes());
    out
}

fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
    }
    !c
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + x as u32) % 65521;
        b = (b + a) % 65521;
    }
    b << 16 | a
}

pub fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for k in 0..4 {
            if k <= c.len() {
                out.push(A[(n >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_and_base64_match_known_values() {
        assert_eq!(crc32(b"IEND"), 0xAE42_6082);
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
        assert_eq!(base64(b"Man"), "TWFu");
        assert_eq!(base64(b"Ma"), "TWE=");
        assert_eq!(base64(b"M"), "TQ==");
    }

    #[test]
    fn a_diagonal_matrix_is_a_dark_diagonal() {
        let mut t = CooTensor::new(vec![300, 300]);
        for i in 0..300 {
            t.push(&[i, i], 1.0);
        }
        let (w, h, cells) = density(&t).unwrap(); // ok: test code, a panic is a failed test
        assert_eq!((w, h), (SIDE, SIDE));
        assert!((0..SIDE).all(|i| cells[i * w + i] > 0));
        assert_eq!(cells.iter().filter(|&&n| n > 0).count(), SIDE);
        let png = png_gray4(w, h, &shades(&cells));
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        // IHDR, then IDAT holding the rows uncompressed, then IEND.
        assert_eq!(&png[12..16], b"IHDR");
        assert_eq!(&png[png.len() - 8..png.len() - 4], b"IEND");
        let idat_len = u32::from_be_bytes(png[33..37].try_into().unwrap()) as usize; // ok: test code, a panic is a failed test
        assert_eq!(idat_len, 2 + 5 + SIDE * (SIDE / 2 + 1) + 4);
    }

    #[test]
    fn vectors_have_no_picture() {
        assert!(sparsity_markdown("x", &CooTensor::new(vec![10])).is_none());
    }
}
