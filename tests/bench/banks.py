def gcd16(e):
    for u in (16,8,4,2,1):
        if e%u==0: return u
def wavefronts(addrs, width):
    per = 32 if width<=4 else 16 if width==8 else 8
    total=0
    for g in range(0,32,per):
        banks={}
        for a in addrs[g:g+per]:
            if a is None: continue
            for w in range(a//4, (a+width-1)//4+1):
                banks.setdefault(w%32,set()).add(w)
        if banks: total+=max(len(s) for s in banks.values())
    return total
def sim(E, TR, TC, pad, transpose, revr, revc, shift, remap):
    U=gcd16(E); RW=TC*E//16
    SR = TC if transpose else TR; SC = TR if transpose else TC
    LW=SC*E//16+1
    WS = 20 if remap else 16
    SROW=LW*WS+pad
    f = (lambda x: x + 4*(x>>4)) if remap else (lambda x: x)
    load=0; n=SR*LW
    for wb in range(0,n,32):
        for part in range(4):
            addrs=[]
            for lane in range(32):
                i=wb+lane
                if i>=n: addrs.append(None); continue
                row,word=divmod(i,LW)
                addrs.append(row*SROW+WS*word+4*part)
            load+=wavefronts(addrs,4)
    gather=0; n=TR*RW
    for wb in range(0,n,32):
        for k in range(16//U):
            addrs=[]
            for lane in range(32):
                i=wb+lane
                if i>=n: addrs.append(None); continue
                ir,word=divmod(i,RW)
                o=word*16+k*U; q=min(o//E,TC-1); b=o%E
                if transpose:
                    lrow = TC-1-q if revr else q; lcol = TR-1-ir if revc else ir
                else:
                    lrow = TR-1-ir if revr else ir; lcol = TC-1-q if revc else q
                addrs.append(lrow*SROW+f(shift+lcol*E+b))
            gather+=wavefronts(addrs,U)
    ideal_load = SR*LW*4/32
    ideal_g = TR*RW*(16//U)/32 * (1 if U<=4 else U/4)
    return load/ideal_load, gather/ideal_g
def evaluate(E,TR,TC,pad,transpose,remap):
    U=gcd16(E); worst=0; tot=0; lw=0
    for rr in (0,1):
        for rc in (0,1):
            for sh in sorted(set([0, (E*5)%16 - ((E*5)%16)%U])):
                l,g=sim(E,TR,TC,pad,transpose,rr,rc,sh,remap)
                worst=max(worst,g); tot+=g; lw=max(lw,l)
    return worst,tot/8,lw
import itertools
print("TRANSPOSED")
T={1:[(128,32),(64,64),(256,32),(128,64)],2:[(64,64),(128,32),(64,32)],3:[(64,64),(128,16),(64,32),(128,32)],4:[(32,32),(64,32),(64,64)],6:[(32,32),(48,48),(64,32)],8:[(32,16),(32,32)],12:[(32,16),(32,32)],16:[(32,32)]}
for E,shapes in T.items():
    U=gcd16(E); res=[]
    for remap in ([False,True] if U<=4 else [False]):
        for TR,TC in shapes:
            for pad in range(0,68,4):
                if U>=8 and pad%U: continue
                w,t,l=evaluate(E,TR,TC,pad,True,remap)
                res.append((round(w,2),round(t,2),round(l,2),TR,TC,pad,remap))
    res.sort(key=lambda r:(r[0],r[1],-r[3]*r[4]))
    print(E,res[:3])
print("NOT TRANSPOSED")
N={1:[(8,1024),(4,1024),(16,512)],2:[(8,512),(16,256)],3:[(8,336),(16,176),(8,160)],4:[(8,256),(16,128)],6:[(8,160),(16,80)],8:[(8,128),(16,64)],12:[(8,80),(16,48)],16:[(8,64),(16,32)]}
for E,shapes in N.items():
    U=gcd16(E); res=[]
    for remap in ([False,True] if U<=4 else [False]):
        for TR,TC in shapes:
            for pad in range(0,36,4):
                if U>=8 and pad%U: continue
                w,t,l=evaluate(E,TR,TC,pad,False,remap)
                res.append((round(w,2),round(t,2),round(l,2),TR,TC,pad,remap))
    res.sort(key=lambda r:(r[0],r[1],r[2]))
    print(E,res[:3])
